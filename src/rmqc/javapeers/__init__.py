"""Apache RocketMQ's own Java processes run beside rmqc on loopback (docs/interop.md): the launcher
(NameServer, brokers in controller mode, the Java controller, mqadmin, the interop Producer and
Consumer of interop/java, built by `make interop`) and the bring-up of one broker group of three.
Used by `rmqc chaos run --brokers java`, the benchmarks' Java anchors and the interop tests; it
never runs unless asked for, and says what is missing when the jars are not built."""

from ._group import (
    ALL,
    BRING_UP_S,
    GROUP,
    POLL_S,
    TOPIC,
    Addressed,
    MqAdminFailed,
    WaitTimedOut,
    bring_up,
    mqadmin_ok,
    now_ms,
    replica_state,
    wait_for,
)
from ._processes import (
    CLUSTER,
    JVM_FLAGS,
    Broker,
    JavaController,
    JavaControllers,
    JavaProgram,
    MqAdmin,
    NameServer,
    RocketMQ,
    TlsFiles,
    classpath,
    interop_dir,
    java_tls_properties,
    parse_sync_state_set,
    rmqc_security_settings,
)

__all__ = ["ALL", "BRING_UP_S", "CLUSTER", "GROUP", "JVM_FLAGS", "POLL_S", "TOPIC", "Addressed", "Broker",
           "JavaController", "JavaControllers", "JavaProgram", "MqAdmin", "MqAdminFailed", "NameServer", "RocketMQ",
           "TlsFiles", "WaitTimedOut", "bring_up", "classpath", "interop_dir", "java_tls_properties", "mqadmin_ok",
           "now_ms", "parse_sync_state_set", "replica_state", "rmqc_security_settings", "wait_for"]
