"""rmqc.liveness"""
