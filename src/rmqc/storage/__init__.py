"""rmqc.storage"""
