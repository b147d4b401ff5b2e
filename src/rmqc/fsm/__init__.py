"""rmqc.fsm"""
