"""rmqc.replica: the sans-IO controller node (driver, group commit, reads, forwarding, liveness and
elections, notifier decisions) that both `rmqc serve` (rmqc.node, the Trio shell) and the simulator
run. No trio, no sockets, no clocks, no threads: see _io.py for the contract."""

from ._io import (
    Action as Action,
    Answer as Answer,
    Clock as Clock,
    ForwardRequest as ForwardRequest,
    Notify as Notify,
    Observer as Observer,
    Outbox as Outbox,
    PeerLag as PeerLag,
    ReplicaConfig as ReplicaConfig,
    ReplicaStatus as ReplicaStatus,
    ReplicaStorage as ReplicaStorage,
    SendDigest as SendDigest,
    SendRaft as SendRaft,
    SnapshotOutcome as SnapshotOutcome,
    StopProcess as StopProcess,
    WriteSnapshot as WriteSnapshot,
)
