"""rmqc.testing"""
