"""rmqc.reads"""
