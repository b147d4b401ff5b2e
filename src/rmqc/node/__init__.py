"""rmqc.node"""
