"""rmqc.raft"""
