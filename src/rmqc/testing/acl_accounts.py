"""The ACL accounts of the tests that run nodes with `acl_enabled`: a RocketMQ plain_acl.yml of one
broker account and one admin account, and the credentials that sign as each."""

from __future__ import annotations

from rmqc.acl import Credentials

PLAIN_ACL_YML = """
accounts:
  - accessKey: broker-key
    secretKey: broker-secret
  - accessKey: admin-key
    secretKey: admin-secret
    admin: true
"""
BROKER = Credentials("broker-key", "broker-secret")
ADMIN = Credentials("admin-key", "admin-secret")
