"""rmqc: a high-availability controller for Apache RocketMQ 5 (RIP-44)."""

__version__ = "0.1.0"
