"""rmqc.client"""
