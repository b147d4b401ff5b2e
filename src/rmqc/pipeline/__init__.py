"""rmqc.pipeline"""
