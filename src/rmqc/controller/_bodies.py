"""Response and notification bodies, written as fastjson writes them (spec 1.6, 3.x)."""

from __future__ import annotations

from collections.abc import Callable

from rmqc.fsm import BrokerGroup
from rmqc.remoting import dumps_fastjson


def sync_state_set_body(group: BrokerGroup) -> bytes:
    """`SyncStateSet`: {"syncStateSet":[1,2],"syncStateSetEpoch":3}."""
    return dumps_fastjson(
        {"syncStateSet": group.sorted_sync_state_set(), "syncStateSetEpoch": group.sync_state_set_epoch}
    )


def elect_master_body(group: BrokerGroup) -> bytes:
    """`ElectMasterResponseBody` with `brokerAddrs` as a Map<Long,String> (bare numeric keys)."""
    member_group = {
        "brokerAddrs": {broker_id: r.address for broker_id, r in group.replicas.items()},
        "brokerName": group.broker_name,
        "cluster": group.cluster_name,
    }
    return dumps_fastjson({"brokerMemberGroup": member_group, "syncStateSet": group.sorted_sync_state_set()})


def master_still_exists_body(group: BrokerGroup) -> bytes:
    return dumps_fastjson({"syncStateSet": group.sorted_sync_state_set()})


def replicas_info_body(groups: list[BrokerGroup], is_alive: Callable[[BrokerGroup, int], bool]) -> bytes:
    """`BrokerReplicasInfo` (1006): every registered id once, in or not in the SyncStateSet."""
    table = {}
    for group in groups:
        in_sync: list[dict[str, object]] = []
        not_in_sync: list[dict[str, object]] = []
        for broker_id in sorted(group.replicas):
            identity = {
                "alive": is_alive(group, broker_id),
                "brokerAddress": group.replicas[broker_id].address,
                "brokerId": broker_id,
                "brokerName": group.broker_name,
            }
            (in_sync if broker_id in group.sync_state_set else not_in_sync).append(identity)
        table[group.broker_name] = {
            "inSyncReplicas": in_sync,
            "masterAddress": group.master_address,
            "masterBrokerId": group.master_id,
            "masterEpoch": group.master_epoch,
            "notInSyncReplicas": not_in_sync,
            "syncStateSetEpoch": group.sync_state_set_epoch,
        }
    return dumps_fastjson({"replicasInfoTable": table})
