"""Real Apache RocketMQ processes beside rmqc (docs/interop.md): a Java NameServer, Java brokers
in controller mode against rmqc nodes, the Java controller, `mqadmin` commands and the
Producer/Consumer programs of interop/java. The interop tests, the benchmarks' Java anchors and
`rmqc chaos run --brokers java` all start them through this one launcher.

Everything runs on 127.0.0.1 with its own directory under the given tmp path (data, the
`user.home` the RocketMQ logs go to, stdout/stderr) and a small JVM. Processes are started and
signalled through rmqc.launcher (by PID, own session, SIGTERM when the test process dies) and
`RocketMQ.close()` stops every one of them (SIGTERM, then SIGKILL after the grace period); use
`async with RocketMQ(tmp_path) as rmq:` so that this happens whatever the test does.

With `RocketMQ(tmp_path, tls=certs)` the NameServer, the brokers and mqadmin speak TLS: each JVM
gets RocketMQ's TLS system properties (`java_tls_properties`), so its remoting client dials TLS
(to the controllers, the NameServer and other brokers), shows the client certificate and checks the
other side's against the CA, and its remoting server answers TLS with the node certificate (and
plain, RocketMQ's default permissive mode: the Producer and Consumer stay plain). With
`broker_credentials` the brokers sign their requests (broker.conf
`innerClientAuthenticationCredentials`), with `admin_credentials` mqadmin does (`conf/tools.yml`).

The jars come from `make interop` (interop/java/target/classpath.txt, the jars themselves in
~/.cache/rmqc-interop); without it `RocketMQ(...)` fails and says so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Protocol

import trio

from rmqc.acl import Credentials
from rmqc.client import ClientError, ControllerClient
from rmqc.launcher import Process, ProcessFailed, free_ports, stop_processes

__all__ = ["CLUSTER", "JVM_FLAGS", "Broker", "JavaController", "JavaControllers", "JavaProgram", "MqAdmin",
           "NameServer", "RocketMQ", "TlsFiles", "classpath", "interop_dir", "java_tls_properties",
           "parse_sync_state_set", "rmqc_security_settings"]



class TlsFiles(Protocol):
    """The PEM files a TLS run hands to the JVMs and the rmqc nodes (rmqc.testing.certs.Certs has them)."""

    @property
    def ca(self) -> Path: ...

    @property
    def node_cert(self) -> Path: ...

    @property
    def node_key(self) -> Path: ...

    @property
    def client_cert(self) -> Path: ...

    @property
    def client_key(self) -> Path: ...


CLUSTER = "rmqc-interop"
JAVA = shutil.which("java") or "/usr/bin/java"
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
CONTROLLER_MAIN = "org.apache.rocketmq.controller.ControllerStartup"
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
PRODUCER_MAIN = "org.rmqc.interop.Producer"
CONSUMER_MAIN = "org.rmqc.interop.Consumer"
# Small JVMs that start fast: the machine has two shared cores and a test runs up to seven JVMs.
JVM_FLAGS = ("-Xms64m", "-Xmx256m", "-XX:MaxDirectMemorySize=256m", "-XX:+UseSerialGC",
             "-XX:TieredStopAtLevel=1", "-Xss512k", "-Djava.net.preferIPv4Stack=true")
TOOL_JVM_FLAGS = ("-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                  "-Djava.net.preferIPv4Stack=true")
START_TIMEOUT_S = 90.0  # a broker JVM on a loaded 2-core machine: ~5-15 s, more under load
MQADMIN_TIMEOUT_S = 60.0
# SIGTERM, then SIGKILL after this: a broker's shutdown hook takes ~9 s on this machine (it joins
# its service threads one by one), and a test's data is thrown away, so it is not waited for
STOP_GRACE_S = 3.0


def interop_dir() -> Path:
    """interop/java of this checkout (RMQC_INTEROP_DIR overrides)."""
    override = os.environ.get("RMQC_INTEROP_DIR")
    return Path(override) if override else Path(__file__).resolve().parents[3] / "interop" / "java"


def classpath() -> str:
    """The compiled programs and the pinned release's jars, as `make interop` left them."""
    root = interop_dir()
    listing = root / "target" / "classpath.txt"
    classes = root / "target" / "classes"
    if not listing.is_file() or not classes.is_dir():
        raise ProcessFailed(f"{listing} is missing: run `make interop` first (it builds interop/java)")
    jars = listing.read_text().strip()
    missing = [jar for jar in jars.split(os.pathsep) if not Path(jar).is_file()]
    if missing:
        raise ProcessFailed(f"{len(missing)} jars of {listing} are gone (e.g. {missing[0]}): "
                            f"rm -rf {root / 'target'} and run `make interop` again")
    return f"{classes}{os.pathsep}{jars}"


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def broker_ports() -> tuple[int, int]:
    """(listenPort, haListenPort): a broker also listens on listenPort - 2 (its "fast" channel)."""
    for _ in range(100):
        (port,) = free_ports(1)
        if port > 1026 and _port_free(port - 2):
            ha_ports = [p for p in free_ports(3) if abs(p - port) > 2]
            if ha_ports:
                return port, ha_ports[0]
    raise ProcessFailed("no free port P with P-2 also free on 127.0.0.1")


def java_tls_properties(certs: TlsFiles) -> tuple[str, ...]:
    """RocketMQ's TLS system properties (remoting TlsSystemConfig, read by TlsHelper) for a JVM
    that dials TLS, shows `certs`' client certificate, trusts only `certs`' CA, and serves TLS
    with the node certificate. `tls.enable` is read only as a system property (NettyClientConfig's
    useTLS, ClientConfig's for mqadmin); test mode off, or the client trusts anyone and the server
    shows a self-signed certificate; `tls.config.file` pointed at nothing, so that no
    /etc/rocketmq/tls.properties of the machine overrides these."""
    return ("-Dtls.enable=true", "-Dtls.test.mode.enable=false",
            "-Dtls.client.authServer=true", f"-Dtls.client.trustCertPath={certs.ca}",
            f"-Dtls.client.certPath={certs.client_cert}", f"-Dtls.client.keyPath={certs.client_key}",
            f"-Dtls.server.certPath={certs.node_cert}", f"-Dtls.server.keyPath={certs.node_key}",
            f"-Dtls.config.file={certs.ca.parent / 'no-tls.properties'}")


def rmqc_security_settings(certs: TlsFiles, acl_file: Path | None = None) -> tuple[str, ...]:
    """`rmqc serve --set` settings for the other side: TLS enforcing with client certificates
    (peers over mutual TLS, 1008 notifications over TLS too) with `certs`, and ACL with
    `acl_file` when given."""
    tls = ("tls_mode=enforcing", "tls_auth_client=true", "tls_notify=true", f"tls_cert_path={certs.node_cert}",
           f"tls_key_path={certs.node_key}", f"tls_trust_cert_path={certs.ca}")
    return (*tls, "acl_enabled=true", f"acl_file={acl_file}") if acl_file is not None else tls


def broker_signing_config(credentials: Credentials, auth_dir: Path) -> dict[str, object]:
    """broker.conf settings that make a 5.5.0 broker sign its outgoing requests (controllers,
    NameServer) with `credentials`: ACL 2.0's `innerClientAuthenticationCredentials`, a JSON
    SessionCredentials (BrokerOuterAPI then registers an AclClientRPCHook). The broker also stores
    that account as a super user of its own ACL 2.0 metadata at start-up and refuses to start
    ("The authenticationMetadataProvider is not configured") without a metadata provider: the
    local one, a RocksDB under `auth_dir`. The broker's own authentication stays off."""
    account = {"accessKey": credentials.access_key, "secretKey": credentials.secret_key}
    return {"innerClientAuthenticationCredentials": json.dumps(account, separators=(",", ":")),
            "authenticationMetadataProvider":
                "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
            "authConfigPath": auth_dir}


def write_properties(path: Path, properties: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))


@dataclass(eq=False)
class JavaProgram:
    """One JVM: its own directory (`user.home`, so the RocketMQ logs land in <dir>/logs), stdout to
    <dir>/stdout.log and stderr to <dir>/stderr.log, appended across restarts."""

    name: str
    directory: Path
    main: str
    args: Sequence[str]
    classpath: str
    jvm_flags: Sequence[str] = JVM_FLAGS
    process: Process | None = None
    runs: list[Process] = field(default_factory=list)

    def argv(self) -> list[str]:
        return [JAVA, *self.jvm_flags, f"-Duser.home={self.directory}", "-cp", self.classpath, self.main,
                *self.args]

    def spawn(self) -> Process:
        home = self.directory / "rocketmq-home"
        (home / "conf").mkdir(parents=True, exist_ok=True)
        self.process = Process(self.name, self.argv(), self.directory / "stdout.log",
                               err_path=self.directory / "stderr.log", env={"ROCKETMQ_HOME": str(home)},
                               cwd=self.directory)
        self.runs.append(self.process)
        return self.process

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.alive

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def kill(self, signum: int = signal.SIGKILL) -> None:
        if self.process is not None:
            self.process.signal(signum)

    async def wait_exit(self, timeout_s: float = 15.0) -> int:
        assert self.process is not None, f"{self.name} was never started"
        return await self.process.wait_exit(timeout_s)

    def output(self) -> str:
        """Everything the current run wrote to stdout."""
        return self.process.output_text() if self.process is not None else ""

    def json_lines(self) -> list[dict[str, Any]]:
        """The JSON lines of the current run's stdout (our Producer/Consumer)."""
        lines = []
        for line in self.output().splitlines():
            if line.startswith("{") and line.endswith("}"):
                lines.append(json.loads(line))
        return lines

    def tail(self, lines: int = 30) -> str:
        """The end of the current run's stdout and stderr, then of the RocketMQ log."""
        if self.process is None:
            return ""
        output = (self.process.output_text().splitlines() + self.process.log_text().splitlines())[-lines:]
        try:
            log = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            log = []
        return "\n".join([*output, f"[{self.log_path}]", *log])

    @property
    def log_path(self) -> Path:
        """The RocketMQ log of this process (interop/java/src/main/resources/rmq.logback.xml)."""
        return self.directory / "logs" / "rocketmq.log"


@dataclass(eq=False)
class _Server(JavaProgram):
    """A Java process serving on 127.0.0.1:`port`, started once it logs its BOOT_LINE."""

    BOOT_LINE: ClassVar[str] = "boot success"
    port: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        self.spawn()
        assert self.process is not None
        await self.process.wait_for_output(self.BOOT_LINE, timeout_s)


@dataclass(eq=False)
class NameServer(_Server):
    BOOT_LINE: ClassVar[str] = "The Name Server boot success"


@dataclass(eq=False)
class Broker(JavaProgram):
    """A broker of one group in controller mode (`brokerId=-1`: the controller assigns the id,
    which the broker keeps in <store>/brokerIdentity)."""

    broker_name: str = "broker-a"
    port: int = 0
    ha_port: int = 0
    config: dict[str, object] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def store(self) -> Path:
        return self.directory / "store"

    def broker_id(self) -> int | None:
        """The id the controller gave this broker (from <store>/brokerIdentity), None before."""
        try:
            text = (self.store / "brokerIdentity").read_text()  # "cluster#brokerName#brokerId"
        except OSError:
            return None
        match = re.fullmatch(r"[^#]*#[^#]*#(\d+)", text.strip())
        return int(match.group(1)) if match else None

    def spawn(self) -> Process:
        write_properties(self.directory / "broker.conf", self.config)
        return super().spawn()

    async def wait_booted(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until this run printed "boot success" (the broker then registers with the controller in
        the background: poll the controller for the result)."""
        assert self.process is not None, f"{self.name} was never started"
        await self.process.wait_for_output(r"boot success", timeout_s)

    async def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start (again, on the same store) and wait for "boot success"."""
        self.spawn()
        await self.wait_booted(timeout_s)


@dataclass(eq=False)
class JavaController(_Server):
    """One node of Apache RocketMQ's own controller, DLedger or JRaft mode (for side-by-side runs)."""

    node_id: str = "n0"


@dataclass(eq=False)
class JavaControllers:
    """Apache RocketMQ's DLedger controller, `size` standalone nodes: the same `addresses`,
    `wait_leader` and `logs` as rmqc.testing.cluster.Cluster, so a scenario runs against either."""

    nodes: list[JavaController]

    @property
    def addresses(self) -> list[str]:
        return [node.address for node in self.nodes]

    def node(self, address: str) -> JavaController:
        return next(node for node in self.nodes if node.address == address)

    async def start(self) -> None:
        for node in self.nodes:
            node.spawn()
        for node in self.nodes:
            assert node.process is not None
            await node.process.wait_for_output(r"boot success", START_TIMEOUT_S)

    async def leader(self, client: ControllerClient) -> str | None:
        """The leader address every running node names in its 1005 answer, None if they differ or
        name a node that is not running (DLedger followers keep naming a dead leader for seconds)."""
        named = set()
        for node in self.nodes:
            if not node.running:
                continue
            try:
                answer = await client.get_metadata(node.address)
            except ClientError:
                return None
            named.add(answer.ext("controllerLeaderAddress") or "")
        running = {node.address for node in self.nodes if node.running}
        return named.pop() if len(named) == 1 and named <= running else None

    async def wait_leader(self, client: ControllerClient, timeout_s: float = 60.0) -> str:
        with trio.move_on_after(timeout_s):
            while (leader := await self.leader(client)) is None:
                await trio.sleep(0.1)
            return leader
        raise ProcessFailed(f"the Java controllers agreed on no leader within {timeout_s:g} s")

    def logs(self) -> str:
        return "\n".join(f"--- {node.name} ---\n{node.tail()}" for node in self.nodes)

    async def stop(self) -> None:
        """SIGTERM, SIGKILL after the grace period (in a worker thread, shielded, like RocketMQ.aclose)."""
        runs = [run for node in self.nodes for run in node.runs if run.alive]
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(stop_processes, runs, signal.SIGTERM, STOP_GRACE_S)


@dataclass
class MqAdmin:
    """`mqadmin <command> ...` as a JVM per call."""

    directory: Path
    classpath: str
    jvm_flags: Sequence[str] = TOOL_JVM_FLAGS
    credentials: Credentials | None = None  # signs every call unless told otherwise
    programs: list[JavaProgram] = field(default_factory=list)  # every call, for RocketMQ.close

    async def __call__(self, *args: str, timeout_s: float = MQADMIN_TIMEOUT_S,
                       credentials: Credentials | bool | None = True) -> tuple[int, str]:
        """(exit code, stdout + stderr) of one command; its output also stays in <directory>/NNN-command.
        Signed with `credentials` (True: the default account, False or None: unsigned)."""
        number = len(self.programs) + 1
        program = JavaProgram(f"mqadmin-{number}-{args[0]}", self.directory / f"{number:03d}-{args[0]}",
                              MQADMIN_MAIN, list(args), self.classpath, jvm_flags=self.jvm_flags)
        self.programs.append(program)
        account = self.credentials if credentials is True else credentials or None
        if account is not None:
            # MQAdminStartup signs with the account of $ROCKETMQ_HOME/conf/tools.yml (AclUtils)
            tools = program.directory / "rocketmq-home" / "conf" / "tools.yml"
            tools.parent.mkdir(parents=True, exist_ok=True)
            tools.write_text(f"accessKey: {account.access_key}\nsecretKey: {account.secret_key}\n")
        process = program.spawn()
        try:
            code = await process.wait_exit(timeout_s)
        except ProcessFailed:
            process.kill()
            raise
        return code, process.output_text() + process.log_text()


class RocketMQ:
    """The Java side of an interop test: `async with RocketMQ(tmp_path) as rmq:` then
    `await rmq.start_namesrv()`, `rmq.broker(...)`, `await rmq.mqadmin(...)`, `rmq.producer(...)`.
    Every process is stopped on exit from the block."""

    def __init__(self, tmp_path: Path, *, tls: TlsFiles | None = None, broker_credentials: Credentials | None = None,
                 admin_credentials: Credentials | None = None) -> None:
        self.root = tmp_path / "rocketmq"
        self.root.mkdir(parents=True, exist_ok=True)
        self.classpath = classpath()
        tls_flags = java_tls_properties(tls) if tls is not None else ()
        self.jvm_flags = (*JVM_FLAGS, *tls_flags)  # the NameServer's and the brokers'
        self.broker_credentials = broker_credentials
        self.programs: list[JavaProgram] = []
        self.namesrv: NameServer | None = None
        # The NameServer addresses brokers are given (`namesrvAddr`): the Java NameServer's, or
        # the rmqc nodes' (`use_rmqc_namesrv`: rmqc answers as NameServer, docs/namesrv.md).
        self.namesrv_addr: str | None = None
        self.mqadmin = MqAdmin(self.root / "mqadmin", self.classpath, (*TOOL_JVM_FLAGS, *tls_flags),
                               admin_credentials)

    async def __aenter__(self) -> RocketMQ:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """close() in a worker thread (it only signals and reaps), shielded: it runs to the end
        even when the test is being cancelled."""
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self.close)

    def close(self) -> None:
        """SIGTERM to every process still running (mqadmin and clients first, then brokers, the
        NameServer last), SIGKILL for what still runs after the grace period."""
        order = sorted([*self.mqadmin.programs, *self.programs],
                       key=lambda p: (isinstance(p, NameServer), isinstance(p, Broker)))
        stop_processes([run for program in order for run in program.runs if run.alive], signal.SIGTERM,
                       STOP_GRACE_S)

    def _add(self, program: JavaProgram) -> JavaProgram:
        self.programs.append(program)
        return program

    async def start_namesrv(self) -> NameServer:
        (port,) = free_ports(1)
        directory = self.root / "namesrv"
        write_properties(directory / "namesrv.conf", {"listenPort": port, "bindAddress": "127.0.0.1"})
        namesrv = NameServer("namesrv", directory, NAMESRV_MAIN, ["-c", str(directory / "namesrv.conf")],
                             self.classpath, self.jvm_flags, port=port)
        self._add(namesrv)
        await namesrv.start()
        self.namesrv = namesrv
        return namesrv

    def use_rmqc_namesrv(self, addresses: Iterable[str]) -> None:
        """No Java NameServer: brokers register with these rmqc nodes."""
        self.namesrv_addr = ";".join(addresses)

    def _namesrv_address(self) -> str:
        if self.namesrv_addr is not None:
            return self.namesrv_addr
        assert self.namesrv is not None, "start the NameServer first (or use_rmqc_namesrv)"
        return self.namesrv.address

    def broker(self, index: int, controllers: Iterable[str], broker_name: str = "broker-a",
               extra: dict[str, object] | None = None, credentials: Credentials | bool | None = True) -> Broker:
        """A broker replica (not started): `await broker.start()`. It signs its requests with
        `credentials` (True: the RocketMQ's broker_credentials, False or None: unsigned)."""
        account = self.broker_credentials if credentials is True else credentials or None
        port, ha_port = broker_ports()
        directory = self.root / f"{broker_name}-{index}"
        signing = broker_signing_config(account, directory / "auth") if account else {}
        store = directory / "store"
        config: dict[str, object] = {
            "brokerClusterName": CLUSTER,
            "brokerName": broker_name,
            "brokerId": -1,
            "brokerRole": "SLAVE",
            "enableControllerMode": "true",
            "controllerAddr": ";".join(controllers),
            "namesrvAddr": self._namesrv_address(),
            "fetchNamesrvAddrByAddressServer": "false",
            "allAckInSyncStateSet": "true",
            "brokerIP1": "127.0.0.1",
            "brokerIP2": "127.0.0.1",
            "bindAddress": "127.0.0.1",
            "listenPort": port,
            "haListenPort": ha_port,
            "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog",
            # small files: a test writes kilobytes, and 3 brokers share a small tmp disk
            "mappedFileSizeCommitLog": 16 * 1024 * 1024,
            "mappedFileSizeConsumeQueue": 20 * 10000,
            "maxHashSlotNum": 10000,
            "maxIndexNum": 40000,
            "timerWheelEnable": "false",
            "autoCreateTopicEnable": "true",
            "flushDiskType": "ASYNC_FLUSH",
            # a slave learns a new master's HA address only from its NameServer registration, every
            # 30 s by default (docs/interop.md): the broker's minimum, 10 s, keeps a failover's
            # rejoin inside the tests' patience on a loaded machine (a full run saw it miss 90 s)
            "registerNameServerPeriod": 10000,
            # fewer threads on a 2-core machine
            "sendMessageThreadPoolNums": 2,
            "pullMessageThreadPoolNums": 4,
            "processReplyMessageThreadPoolNums": 2,
            "queryMessageThreadPoolNums": 2,
            "adminBrokerThreadPoolNums": 4,
            "clientManageThreadPoolNums": 4,
            "consumerManageThreadPoolNums": 4,
            "heartbeatThreadPoolNums": 2,
            "endTransactionThreadPoolNums": 2,
            **signing,
            **(extra or {}),
        }
        broker = Broker(f"{broker_name}-{index}", directory, BROKER_MAIN, ["-c", str(directory / "broker.conf")],
                        self.classpath, self.jvm_flags, broker_name=broker_name, port=port, ha_port=ha_port,
                        config=config)
        self._add(broker)
        return broker

    def java_controllers(self, size: int = 3, mode: str = "dledger") -> JavaControllers:
        """Apache RocketMQ's own controller, `size` nodes, not started: `mode` "dledger" (the
        default) or "jraft" (`controllerType=jRaft`: a Raft port per node, `jRaftServerId`,
        `jRaftInitConf`, and the port brokers and mqadmin use in `jRaftControllerRPCAddr`)."""
        assert mode in ("dledger", "jraft"), mode
        ports = free_ports(size)
        raft_ports = free_ports(size + len(ports))
        raft_ports = [p for p in raft_ports if p not in ports][:size]
        peers = ";".join(f"n{i}-127.0.0.1:{port}" for i, port in enumerate(ports))
        nodes = []
        for i, port in enumerate(ports):
            directory = self.root / f"controller-{mode}-n{i}"
            config: dict[str, object] = {
                "controllerStorePath": directory / "store", "mappedFileSize": 16 * 1024 * 1024,
                "configStorePath": directory / "controller.properties",
            }
            if mode == "dledger":
                config |= {"controllerDLegerGroup": "rmqc-interop", "controllerDLegerPeers": peers,
                           "controllerDLegerSelfId": f"n{i}"}
            else:
                config |= {"controllerType": "jRaft", "jRaftGroupId": "rmqc-interop",
                           "jRaftServerId": f"127.0.0.1:{raft_ports[i]}",
                           "jRaftInitConf": ",".join(f"127.0.0.1:{p}" for p in raft_ports),
                           "jRaftControllerRPCAddr": ",".join(f"127.0.0.1:{p}" for p in ports),
                           "jRaftSnapshotIntervalSecs": 3600}
            write_properties(directory / "controller.conf", config)
            node = JavaController(f"controller-{mode}-n{i}", directory, CONTROLLER_MAIN,
                                  ["-c", str(directory / "controller.conf")], self.classpath, node_id=f"n{i}",
                                  port=port)
            self._add(node)
            nodes.append(node)
        return JavaControllers(nodes)

    def producer(self, topic: str, count: int = 0, interval_ms: int = 20, name: str = "producer",
                 **options: object) -> JavaProgram:
        """Our Producer, started: one JSON line per send (see interop/java)."""
        namesrv = str(options.pop("namesrv", None) or self._namesrv_address())
        args = [f"namesrv={namesrv}", f"topic={topic}", f"count={count}", f"intervalMs={interval_ms}",
                *(f"{key}={value}" for key, value in options.items())]
        program = self._add(JavaProgram(name, self.root / name, PRODUCER_MAIN, args, self.classpath))
        program.spawn()
        return program

    def consumer(self, topic: str, name: str = "consumer", **options: object) -> JavaProgram:
        """Our Consumer, started: one JSON line per message received."""
        namesrv = str(options.pop("namesrv", None) or self._namesrv_address())
        args = [f"namesrv={namesrv}", f"topic={topic}",
                *(f"{key}={value}" for key, value in options.items())]
        program = self._add(JavaProgram(name, self.root / name, CONSUMER_MAIN, args, self.classpath))
        program.spawn()
        return program

    def logs(self, lines: int = 30) -> str:
        """The end of every process's output, for a failing test's report."""
        return "\n".join(f"--- {program.name} (pid {program.pid}) ---\n{program.tail(lines)}"
                         for program in self.programs)


def parse_sync_state_set(text: str) -> dict[str, Any]:
    """`mqadmin getSyncStateSet -b <name>` output: the '#key: value' fields (ints where they are)
    and the in-sync / not-in-sync replicas as (brokerId, address, alive)."""
    fields: dict[str, Any] = {"in_sync": [], "not_in_sync": []}
    for line in text.splitlines():
        match = re.match(r"\s*#(\w+)\s*[:\t]\s*(\S*)", line)
        if match:
            key, value = match.groups()
            fields[key] = int(value) if re.fullmatch(r"-?\d+", value) else value
            continue
        replica = re.search(r"(InSyncReplica|NotInSyncReplica):\s*ReplicaIdentity\{brokerName='([^']*)', "
                            r"brokerId=(\d+), brokerAddress='([^']*)', alive=(true|false)\}", line)
        if replica:
            kind, _, broker_id, address, alive = replica.groups()
            fields["in_sync" if kind == "InSyncReplica" else "not_in_sync"].append(
                (int(broker_id), address, alive == "true"))
    return fields
