"""rmqc.remoting"""
