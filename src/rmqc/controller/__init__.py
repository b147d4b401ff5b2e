"""rmqc.controller"""
