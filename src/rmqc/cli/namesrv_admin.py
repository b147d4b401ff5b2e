"""`rmqc admin topic` and `rmqc admin kv`: the NameServer commands operators know from mqadmin,
against the rmqc nodes (docs/namesrv.md "Admin commands").

    rmqc admin topic create|update --cluster C TOPIC  17 to every master broker of the cluster (as
                                                      mqadmin updateTopic -c), then 105 until routed
    rmqc admin topic delete --cluster C TOPIC         215 to every master broker, then 216 (replicated)
    rmqc admin topic list [--cluster C]               206 (or 224 for one cluster)
    rmqc admin topic describe TOPIC                   105
    rmqc admin kv put|get|delete|list NAMESPACE ...   100 / 101 / 102 / 219

Same options, credentials and exit codes as the rest of `rmqc admin`; `--json` on each.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from rmqc.cli._render import ExitCode, fail
from rmqc.cli.admin import (
    DEFAULT_CONTROLLERS,
    ConsistencyOption,
    ControllersOption,
    JsonOption,
    NodeOption,
    TimeoutOption,
    parse_controllers,
    run_with_client,
)

__all__ = ["kv_app", "topic_app"]

topic_app = typer.Typer(help="Topics: created on the cluster's master brokers, routed by the rmqc nodes.",
                        no_args_is_help=True)
kv_app = typer.Typer(help="The NameServer's KV config (replicated by the rmqc nodes).", no_args_is_help=True)

TopicArgument = Annotated[str, typer.Argument(help="topic name")]
ClusterOption = Annotated[str, typer.Option("--cluster", help="broker cluster (brokerClusterName)")]
NamespaceArgument = Annotated[str, typer.Argument(help="KV namespace")]
KeyArgument = Annotated[str, typer.Argument(help="KV key")]
WaitOption = Annotated[int, typer.Option("--wait-ms", help="bound on waiting until every node routes the topic")]

UPDATE_AND_CREATE_TOPIC, DELETE_TOPIC_IN_BROKER = 17, 215  # broker requests (RequestCode)
DEFAULT_TOPIC = "TBW102"  # TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC: mqadmin's defaultTopic
TOPIC_NOT_EXIST = 17
ROUTE_POLL_S = 0.1  # between 105s while waiting for a new topic's route


# ---- topics -----------------------------------------------------------------------------------------


async def _master_brokers(client: Any, cluster: str) -> dict[str, str]:
    """broker name -> master address of `cluster`, from 106 (mqadmin's fetchMasterAddrByClusterName)."""
    from rmqc.remoting import loads_fastjson

    answer = await client.request(106, leader=False)
    info = loads_fastjson(answer.body) if answer.code == 0 and answer.body else {}
    names = info.get("clusterAddrTable", {}).get(cluster, [])
    table = info.get("brokerAddrTable", {})
    masters = {name: table[name]["brokerAddrs"].get("0") for name in names if name in table}
    return {name: address for name, address in masters.items() if address}


async def _route(client: Any, topic: str, node: str | None = None) -> tuple[Any, dict[str, Any] | None]:
    import orjson

    answer = await client.request(105, {"topic": topic, "acceptStandardJsonOnly": "true"}, address=node,
                                  leader=False)
    route = orjson.loads(answer.body) if answer.code == 0 and answer.body else None
    return answer, route


def _routed(route: dict[str, Any] | None, masters: dict[str, str], read: int, write: int, perm: int) -> bool:
    """Every master's broker name has the queue data asked for, under its master address."""
    if route is None:
        return False
    queues = {q["brokerName"]: q for q in route["queueDatas"]}
    listed = {b["brokerName"]: b["brokerAddrs"].get("0") for b in route["brokerDatas"]}
    return all(name in queues and (queues[name]["readQueueNums"], queues[name]["writeQueueNums"],
                                   queues[name]["perm"]) == (read, write, perm) and listed.get(name) == address
               for name, address in masters.items())


def _broker_refused(address: str, answer: Any) -> str:
    from rmqc.cli._render import code_name

    return f"broker {address} answered {code_name(answer.code)}: {(answer.remark or '').strip() or 'no remark'}"


def _create_or_update(topic: str, cluster: str, read: int, write: int, perm: int, controllers: str,
                      as_json: bool, timeout_ms: int, wait_ms: int, exists: bool) -> None:
    """`exists`: the topic must already be routed (update) or must not be (create)."""
    import trio

    from rmqc.cli._render import controller_refused, emit_json, render_topic_route

    what = "topic update" if exists else "topic create"
    if not (1 <= read <= 1024 and 1 <= write <= 1024) or perm not in (2, 4, 6):
        fail(ExitCode.USAGE, f"{what}: queue numbers must be 1..1024 and perm 2 (write), 4 (read) or 6 (both)")

    async def call(client: Any) -> tuple[Any, dict[str, Any] | None, str | None]:
        """(last answer, the route once it shows the topic, or why not): no exception is raised
        in here, where the client's nursery would wrap it."""
        before, _ = await _route(client, topic)
        if (before.code == 0) != exists:
            return before, None, None
        masters = await _master_brokers(client, cluster)
        if not masters:
            return before, None, f"cluster {cluster!r} has no master broker registered"
        ext = {"topic": topic, "defaultTopic": DEFAULT_TOPIC, "readQueueNums": read, "writeQueueNums": write,
               "perm": perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}
        for address in masters.values():
            answer = await client.request(UPDATE_AND_CREATE_TOPIC, ext, address=address)
            if answer.code != 0:
                return answer, None, _broker_refused(address, answer)
        with trio.move_on_after(wait_ms / 1000):
            while True:
                answer, route = await _route(client, topic)
                if _routed(route, masters, read, write, perm):
                    return answer, route, None
                await trio.sleep(ROUTE_POLL_S)
        return answer, None, (f"brokers {', '.join(sorted(masters.values()))} took {topic!r}, but the route did "
                              f"not show it within {wait_ms} ms")

    answer, route, problem = run_with_client(parse_controllers(controllers), call, timeout_ms=timeout_ms)
    if problem is not None:
        fail(ExitCode.REFUSED, f"{what}: {problem}",
             hint="mqadmin clusterList shows the registered brokers; their namesrvAddr must name the rmqc nodes; "
                  "a broker's refusal is explained in its log")
    if route is None:
        if answer.code == 0 or answer.code == TOPIC_NOT_EXIST:
            fail(ExitCode.REFUSED, f"{what}: topic {topic!r} " + ("does not exist" if exists else "exists already"),
                 hint="create it first" if exists else "`rmqc admin topic update` changes a topic")
        controller_refused(answer, what, as_json=as_json)
    if as_json:
        emit_json({"topic": topic, "route": route})
    else:
        render_topic_route(topic, route)


ReadQueuesOption = Annotated[int, typer.Option("--read-queues", "-r")]
WriteQueuesOption = Annotated[int, typer.Option("--write-queues", "-w")]
PermOption = Annotated[int, typer.Option("--perm", "-p", help="2 write, 4 read, 6 both")]


@topic_app.command("create")
def topic_create_command(topic: TopicArgument, cluster: ClusterOption,
                         read_queues: ReadQueuesOption = 8, write_queues: WriteQueuesOption = 8,
                         perm: PermOption = 6,
                         controllers: ControllersOption = DEFAULT_CONTROLLERS, as_json: JsonOption = False,
                         timeout_ms: TimeoutOption = 3000, wait_ms: WaitOption = 15_000) -> None:
    """Create a topic on every master broker of the cluster (17), then wait until it is routed."""
    _create_or_update(topic, cluster, read_queues, write_queues, perm, controllers, as_json, timeout_ms, wait_ms,
                      exists=False)


@topic_app.command("update")
def topic_update_command(topic: TopicArgument, cluster: ClusterOption,
                         read_queues: ReadQueuesOption = 8, write_queues: WriteQueuesOption = 8,
                         perm: PermOption = 6,
                         controllers: ControllersOption = DEFAULT_CONTROLLERS, as_json: JsonOption = False,
                         timeout_ms: TimeoutOption = 3000, wait_ms: WaitOption = 15_000) -> None:
    """Change an existing topic's queues or permission on every master broker (17), then wait."""
    _create_or_update(topic, cluster, read_queues, write_queues, perm, controllers, as_json, timeout_ms, wait_ms,
                      exists=True)


@topic_app.command("delete")
def topic_delete_command(topic: TopicArgument, cluster: ClusterOption,
                         controllers: ControllersOption = DEFAULT_CONTROLLERS, as_json: JsonOption = False,
                         timeout_ms: TimeoutOption = 3000) -> None:
    """As mqadmin deleteTopic: from every master broker (215), then from the routes (216)."""
    from rmqc.cli._render import console, controller_refused, emit_json

    async def call(client: Any) -> tuple[Any, list[str], str | None]:
        masters = await _master_brokers(client, cluster)
        for address in masters.values():
            answer = await client.request(DELETE_TOPIC_IN_BROKER, {"topic": topic}, address=address)
            if answer.code != 0:  # as mqadmin deleteTopic: the routes keep the topic
                return answer, [], _broker_refused(address, answer) + "; the routes still have the topic"
        deleted = await client.request(216, {"topic": topic, "clusterName": cluster})
        return deleted, sorted(masters.values()), None

    answer, brokers, problem = run_with_client(parse_controllers(controllers), call, timeout_ms=timeout_ms)
    if problem is not None:
        fail(ExitCode.REFUSED, f"topic delete: {problem}", hint="see the broker's log, then retry")
    if answer.code != 0:
        controller_refused(answer, "topic delete", as_json=as_json)
    if as_json:
        emit_json({"topic": topic, "cluster": cluster, "brokers": brokers})
    else:
        console().print(f"deleted {topic} from {', '.join(brokers) or 'no broker'} and the routes", markup=False)


@topic_app.command("list")
def topic_list_command(cluster: Annotated[str | None, typer.Option("--cluster", help="only this cluster")] = None,
                       controllers: ControllersOption = DEFAULT_CONTROLLERS, node: NodeOption = None,
                       consistency: ConsistencyOption = None, as_json: JsonOption = False,
                       timeout_ms: TimeoutOption = 3000) -> None:
    """Every routed topic (206), or one cluster's (224)."""
    from rmqc.cli._render import controller_refused, emit_json, render_rows
    from rmqc.remoting import loads_fastjson

    code, ext = (206, None) if cluster is None else (224, {"cluster": cluster})
    answer = run_with_client(parse_controllers(controllers),
                             lambda client: client.request(code, ext, address=node, leader=False),
                             timeout_ms=timeout_ms, consistency=consistency, node=node)
    if answer.code != 0:
        controller_refused(answer, "topic list", as_json=as_json)
    topics = sorted(loads_fastjson(answer.body)["topicList"]) if answer.body else []
    if as_json:
        emit_json({"topics": topics})
    else:
        render_rows("topics" + (f" of {cluster}" if cluster else ""), ["topic"], [[t] for t in topics])


@topic_app.command("describe")
def topic_describe_command(topic: TopicArgument, controllers: ControllersOption = DEFAULT_CONTROLLERS,
                           node: NodeOption = None, consistency: ConsistencyOption = None,
                           as_json: JsonOption = False, timeout_ms: TimeoutOption = 3000) -> None:
    """The topic's route (105): brokers with their master, and queue data."""
    from rmqc.cli._render import controller_refused, emit_json, render_topic_route

    answer, route = run_with_client(parse_controllers(controllers), lambda client: _route(client, topic, node),
                                    timeout_ms=timeout_ms, consistency=consistency, node=node)
    if route is None:
        controller_refused(answer, "topic describe", as_json=as_json)
    if as_json:
        emit_json({"topic": topic, "route": route})
    else:
        render_topic_route(topic, route)


# ---- KV config ----------------------------------------------------------------------------------------


def _kv_call(code: int, ext: dict[str, str], what: str, controllers: str, as_json: bool, timeout_ms: int,
             node: str | None = None, consistency: str | None = None) -> Any:
    """One KV request (writes to the leader, reads to `node` or any node); exit 1 when refused."""
    from rmqc.cli._render import controller_refused

    reads = code in (101, 219)
    answer = run_with_client(parse_controllers(controllers),
                             lambda client: client.request(code, ext, address=node, leader=not reads),
                             timeout_ms=timeout_ms, consistency=consistency, node=node)
    if answer.code != 0:
        controller_refused(answer, what, as_json=as_json)
    return answer


@kv_app.command("put")
def kv_put_command(namespace: NamespaceArgument, key: KeyArgument,
                   value: Annotated[str, typer.Argument(help="value")],
                   controllers: ControllersOption = DEFAULT_CONTROLLERS, as_json: JsonOption = False,
                   timeout_ms: TimeoutOption = 3000) -> None:
    """Set NAMESPACE/KEY (100), replicated to every node."""
    from rmqc.cli._render import console, emit_json

    _kv_call(100, {"namespace": namespace, "key": key, "value": value}, "kv put", controllers, as_json, timeout_ms)
    if as_json:
        emit_json({"namespace": namespace, "key": key, "value": value})
    else:
        console().print(f"{namespace}/{key} = {value}", markup=False)


@kv_app.command("get")
def kv_get_command(namespace: NamespaceArgument, key: KeyArgument,
                   controllers: ControllersOption = DEFAULT_CONTROLLERS, node: NodeOption = None,
                   consistency: ConsistencyOption = None, as_json: JsonOption = False,
                   timeout_ms: TimeoutOption = 3000) -> None:
    """Read NAMESPACE/KEY (101) from any node (or --node); exit 1 when absent."""
    from rmqc.cli._render import console, emit_json

    answer = _kv_call(101, {"namespace": namespace, "key": key}, "kv get", controllers, as_json, timeout_ms,
                      node, consistency)
    if as_json:
        emit_json({"namespace": namespace, "key": key, "value": answer.ext("value")})
    else:
        console().print(answer.ext("value") or "", markup=False)


@kv_app.command("delete")
def kv_delete_command(namespace: NamespaceArgument, key: KeyArgument,
                      controllers: ControllersOption = DEFAULT_CONTROLLERS, as_json: JsonOption = False,
                      timeout_ms: TimeoutOption = 3000) -> None:
    """Remove NAMESPACE/KEY (102), replicated; success also when it was absent (as Java)."""
    from rmqc.cli._render import console, emit_json

    _kv_call(102, {"namespace": namespace, "key": key}, "kv delete", controllers, as_json, timeout_ms)
    if as_json:
        emit_json({"namespace": namespace, "key": key, "deleted": True})
    else:
        console().print(f"deleted {namespace}/{key}", markup=False)


@kv_app.command("list")
def kv_list_command(namespace: NamespaceArgument, controllers: ControllersOption = DEFAULT_CONTROLLERS,
                    node: NodeOption = None, consistency: ConsistencyOption = None, as_json: JsonOption = False,
                    timeout_ms: TimeoutOption = 3000) -> None:
    """Every key of NAMESPACE (219); exit 1 when the namespace is empty."""
    from rmqc.cli._render import emit_json, render_rows
    from rmqc.remoting import loads_fastjson

    answer = _kv_call(219, {"namespace": namespace}, "kv list", controllers, as_json, timeout_ms, node, consistency)
    table: dict[str, str] = loads_fastjson(answer.body)["table"] if answer.body else {}
    if as_json:
        emit_json({"namespace": namespace, "table": table})
    else:
        render_rows(f"KV namespace {namespace}", ["key", "value"], [[k, table[k]] for k in sorted(table)])
