"""The Raft protocol as a pure state machine (the shape of etcd raft's raft.go).

Inputs: tick(), step(message), propose*, read_index, transfer, conf changes. Outputs are queued, never
performed: `msgs` may leave at once, `msgs_after_persist` only after the state they depend on is
durable, `read_states` are released reads. Roles are dispatched through tables of handlers.
Every safety rule lives in one small named method so tests can break it on purpose:
`_candidate_log_up_to_date`, `_in_lease`, `_maybe_commit`, `_read_index_ready`, `_lease_valid`,
`_takeover_wait_ticks`.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from rmqc._hot import enum_members
from rmqc.errors import CompactedError
from rmqc.reads import (
    Lease,
    ReadIndexTracker,
    ReadRequest,
    decode_lease_age,
    decode_round_id,
    encode_lease_age,
    encode_round_id,
    lease_duration_ticks,
    takeover_wait_ticks,
)

from ._confchange import conf_state_after, encode_conf_change
from ._config import Config, Role
from ._errors import (
    ConfChangeRefused,
    NoLeader,
    NotLeader,
    RaftInvariantError,
    ReadIndexDropped,
    StaleTermProposal,
    TransferInProgress,
    UncommittedSizeExceeded,
)
from ._log import RaftLog
from ._memory_storage import entries_size
from ._progress import Progress, ProgressState
from ._quorum import VoteResult, committed_index, has_quorum, vote_result
from ._ready import ReadState
from ._storage import Storage
from ._types import (
    ConfChange,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Snapshot,
)

# the members, read without the enum metaclass's lookup hook (rmqc._hot)
MT = enum_members(MessageType)
ROLE = enum_members(Role)
PROGRESS_STATE = enum_members(ProgressState)
ENTRY_TYPE = enum_members(EntryType)

# Vote requests carrying this context come from a TimeoutNow and may disturb a sticky leader
# (thesis 4.2.3). Only a transfer campaign sets it.
CAMPAIGN_TRANSFER = b"transfer"
# The same for a takeover (`take_over`): the leader did not consent, so whoever wins waits out the
# lease it may still hold before committing (rmqc.reads._lease).
CAMPAIGN_TAKEOVER = b"takeover"
DISRUPTIVE_CAMPAIGNS = frozenset({CAMPAIGN_TRANSFER, CAMPAIGN_TAKEOVER})

# Messages that reveal state which must be durable first (term, vote, appended entries): they go
# to msgs_after_persist. Everything else may be sent before the Ready is persisted.
AFTER_PERSIST = frozenset({MT.APP_RESP, MT.VOTE, MT.VOTE_RESP, MT.PRE_VOTE_RESP})

# Reports from the local transport: they carry no term and skip the term checks.
LOCAL_TYPES = frozenset({MT.SNAP_STATUS, MT.UNREACHABLE})

# A repairing node's term probe and its answers skip the term checks (rmqc: "repair").
REPAIR_PROBE_TYPES = frozenset({MT.REPAIR_PROBE, MT.REPAIR_PROBE_RESP})
# What a repairing node leaves unanswered until it knows its fence term.
LEADER_TO_FOLLOWER = frozenset({MT.APP, MT.HEARTBEAT, MT.SNAP, MT.TIMEOUT_NOW, MT.REPAIR_ACK})

# Vote requests and the reply type each gets.
VOTE_RESPONSE_OF = {MT.VOTE: MT.VOTE_RESP, MT.PRE_VOTE: MT.PRE_VOTE_RESP}

# Reading the uncommitted tail / unapplied entries happens in pages of this many bytes so a long
# log never materialises at once.
SCAN_PAGE_BYTES = 1024 * 1024

# Entries a probe carries at most (see _entries_for).
PROBE_ENTRIES = 16

# The transport reports every snapshot send (report_snapshot); if that report is lost, a follower
# would stay in SNAPSHOT forever. After this many election timeouts without news we assume the send
# failed and probe again (a retry bound, not a transfer-time limit: a slow install still succeeds
# because its append reply moves the follower on).
SNAPSHOT_REPORT_TIMEOUT_ELECTIONS = 5


class CampaignType(Enum):
    PRE_ELECTION = "pre_election"
    ELECTION = "election"
    TRANSFER = "transfer"  # the leader's TimeoutNow: it gave up its lease first
    TAKEOVER = "takeover"  # the application believes the leader is gone: no consent
    PRE_TAKEOVER = "pre_takeover"  # a takeover's pre-vote round (take_over with PreVote on)


CAMPAIGN = enum_members(CampaignType)


CAMPAIGN_CONTEXT = {
    CAMPAIGN.TRANSFER: CAMPAIGN_TRANSFER,
    CAMPAIGN.TAKEOVER: CAMPAIGN_TAKEOVER,
    CAMPAIGN.PRE_TAKEOVER: CAMPAIGN_TAKEOVER,
}
# Campaigns that first ask for pre-votes (no term change) and, once a quorum would grant, run the
# real campaign: a node that cannot reach a quorum never raises its term (pitfall 1).
REAL_CAMPAIGN_AFTER = {
    CAMPAIGN.PRE_ELECTION: CAMPAIGN.ELECTION,
    CAMPAIGN.PRE_TAKEOVER: CAMPAIGN.TAKEOVER,
}

# The lease age of a node that never heard from any leader (brand new): no lease to wait out.
LEASE_AGE_NEVER = 1 << 32


@dataclass(slots=True)
class RepairState:
    """What a repairing node knows of its repair (RaftCore.repair; None once it is over)."""

    target: tuple[int, int] | None = None  # (index, term) of the commit index a leader gave us
    signalled: tuple[int, str] | None = None  # (term, leader) last told what we hold
    signalled_tick: int = 0
    votes_refused: int = 0
    terms_heard: dict[str, int] = field(default_factory=dict)  # voter -> the term it reported
    fence_term: int | None = None  # the highest term a majority reported (None: not yet known)
    probed_tick: int | None = None


class RaftCore:
    def __init__(
        self, config: Config, storage: Storage, rng: random.Random, peers: Sequence[str] = (),
        contexts: Mapping[str, bytes] | None = None,
    ) -> None:
        self.config = config
        self.id = config.id
        self.rng = rng
        hard_state, conf_state = storage.initial_state()
        self.log = RaftLog(storage, config.applied)
        restarted = hard_state.term > 0
        if peers and _is_brand_new(storage, hard_state, conf_state):
            hard_state = self._bootstrap(peers, contexts or {})
        if not conf_state.voters and not conf_state.learners and peers:
            conf_state = ConfState(voters=tuple(peers))
        # The state machine (config.applied) may be ahead of the persisted commit (pitfall 11):
        # whatever it applied was committed, so commit covers it.
        self.log.commit_to(max(hard_state.commit, self.log.applied))
        self.term = hard_state.term
        self.vote = hard_state.vote
        self.voters: set[str] = set(conf_state.voters)
        self.learners: set[str] = set(conf_state.learners)
        self.progress: dict[str, Progress] = {}
        self.peer_order: list[str] = []
        self.msgs: list[Message] = []
        self.msgs_after_persist: list[Message] = []
        self.read_states: list[ReadState] = []
        self.ticks = 0  # monotonic tick counter: the core's only clock
        self.heartbeat_round = 0  # the id of the last heartbeat round sent (ids only grow)
        # A restarted node may have acked a leader's lease round before crashing: stay sticky for
        # one election timeout so that lease cannot be broken by our vote (thesis 6.4.1).
        self.leader_contact_elapsed = 0 if restarted else config.election_tick
        # Ticks since we last heard from any leader, in every role: the age of the newest lease
        # round we may have acked, carried in our vote grants. Unlike leader_contact_elapsed it is
        # never advanced on purpose, and a restarted node may have acked just before crashing.
        self.lease_age = 0 if restarted else LEASE_AGE_NEVER
        self.reads = ReadIndexTracker()
        self.lease = Lease(
            lease_duration_ticks(config.lease_bound_ticks, config.lease_drift_ticks), config.check_quorum
        )
        self.campaign_type = CAMPAIGN.ELECTION
        self.repair = RepairState() if config.repairing else None
        self.ended_repair: RepairState | None = None  # over, not yet recorded by the app
        self.role = ROLE.FOLLOWER
        self.lead: str | None = None
        self._uncommitted: deque[tuple[int, int]] = deque()
        self.uncommitted_size = 0
        self._rebuild_progress()
        self._role_handlers = self._handlers()
        self.become_follower(self.term, None)

    def _bootstrap(self, peers: Sequence[str], contexts: Mapping[str, bytes]) -> HardState:
        """A brand-new group: the initial voters enter the log as committed ADD_VOTER entries at
        term 1 (as etcd does), each with its context (the application's: its address), so a node
        that joins later rebuilds membership by replaying the log. The core already knows them,
        so they count as applied here; they reach storage with the first Ready and are re-applied
        (idempotently) after a restart."""
        entries = [
            Entry(i + 1, 1, ENTRY_TYPE.CONF_CHANGE,
                  encode_conf_change(ConfChange(ConfChangeType.ADD_VOTER, peer, contexts.get(peer, b""))))
            for i, peer in enumerate(peers)
        ]
        self.log.append(entries)
        self.log.commit_to(len(entries))
        self.log.applied = len(entries)
        return HardState(term=1, vote=None, commit=len(entries))

    # ================================================================ role changes
    def _reset(self, term: int) -> None:
        if self.term != term:
            self.term = term
            self.vote = None
        self.lead = None
        self.election_elapsed = 0
        self.heartbeat_elapsed = 0
        self.randomized_election_timeout = self.config.election_tick + self.rng.randrange(
            self.config.election_tick
        )
        self.lead_transferee: str | None = None
        self.votes: dict[str, bool] = {}
        self.vote_lease_ages: dict[str, int] = {}  # of the grants of our current campaign
        self.commit_blocked_until_tick = 0  # a takeover leader's wait (_takeover_wait_ticks)
        self.lease_wanted_until_tick = 0  # a leader heartbeats every heartbeat_tick until then
        self.pending_conf_index = 0
        self.own_term_committed = False
        self.lease_fence_index = 0
        self.reads.reset()
        self.lease.expire()
        self._uncommitted.clear()
        self.uncommitted_size = 0
        self.progress = {pid: self._new_progress() for pid in self.progress}

    def _new_progress(self) -> Progress:
        return Progress(
            self.log.last_index() + 1, self.config.max_inflight_msgs, self.config.max_inflight_bytes
        )

    def become_follower(self, term: int, lead: str | None) -> None:
        self._reset(term)
        self.role = ROLE.FOLLOWER
        self.lead = lead
        if lead is not None:
            self.leader_contact_elapsed = 0

    def become_pre_candidate(self) -> None:
        self.role = ROLE.PRE_CANDIDATE
        self.votes = {}
        self.vote_lease_ages = {}
        self.lead = None  # a pre-candidate must forget its leader (pitfall 33)
        self.leader_contact_elapsed = self.config.election_tick

    def become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.role = ROLE.CANDIDATE
        self.vote = self.id
        self.leader_contact_elapsed = self.config.election_tick

    def become_leader(self, commit_wait_ticks: int = 0) -> None:
        self._reset(self.term)
        if commit_wait_ticks:
            self.commit_blocked_until_tick = self.ticks + commit_wait_ticks
        self.role = ROLE.LEADER
        self.lead = self.id
        own = self.progress[self.id]
        own.match = self.log.stable_last_index()
        own.become_replicate()
        own.recent_active = True
        # The uncommitted tail may hold a config change: assume it does (pitfall 19).
        self.pending_conf_index = self.log.last_index()
        self._track_inherited_tail()
        self._append_entries([(ENTRY_TYPE.NORMAL, b"")])  # the no-op that lets us commit (thesis 3.6.2)

    # ================================================================ ticks
    def tick(self) -> None:
        self.ticks += 1
        self.lease_age += 1
        if self.repair is not None and not self._fenced():
            self._probe_for_fence()
        if self.role is ROLE.LEADER:
            self._tick_heartbeat()
        else:
            self.leader_contact_elapsed += 1
            self._tick_election()

    def quiet_ticks(self) -> int:
        """How many next ticks only count (lease_age, leader_contact_elapsed, election_elapsed)
        and act on nothing: the shell may feed them late, as one burst before the next step, and
        need not wake up for them. A leader acts on every tick while its lease is wanted or it
        waits (takeover, transfer), else on its next idle heartbeat or CheckQuorum; a follower or
        candidate on the tick that reaches its election timeout."""
        if not self._fenced():
            return 0  # a repairing node probes for its fence term every heartbeat tick
        if self.role is ROLE.LEADER:
            interval = self._heartbeat_interval()
            if interval == self.config.heartbeat_tick or self.commit_blocked_until_tick or self.lead_transferee:
                return 0
            return max(0, min(interval - self.heartbeat_elapsed, self.config.election_tick - self.election_elapsed) - 1)
        if not self._promotable():
            return self.config.election_tick  # never campaigns; bounded so the shell still looks
        return max(0, self.randomized_election_timeout - self.election_elapsed - 1)

    def _tick_election(self) -> None:
        self.election_elapsed += 1
        if self._promotable() and self.election_elapsed >= self.randomized_election_timeout:
            self.election_elapsed = 0
            self.hup(CAMPAIGN.PRE_ELECTION if self.config.pre_vote else CAMPAIGN.ELECTION)

    def _tick_heartbeat(self) -> None:
        self.heartbeat_elapsed += 1
        self.election_elapsed += 1
        if self.commit_blocked_until_tick and self.ticks >= self.commit_blocked_until_tick:
            self._end_takeover_wait()
        if self.election_elapsed >= self.config.election_tick:
            self.election_elapsed = 0
            if self.config.check_quorum and not self._quorum_recently_active():
                self.become_follower(self.term, None)
                self.leader_contact_elapsed = self.config.election_tick
                return
            if self.lead_transferee is not None:
                self._abort_transfer(fence=True)  # took longer than an election timeout
            self._expire_unreported_snapshots()
        if self.heartbeat_elapsed >= self._heartbeat_interval():
            self.heartbeat_elapsed = 0
            self._bcast_heartbeat()

    def _heartbeat_interval(self) -> int:
        """Every heartbeat_tick while the lease is wanted; idle_heartbeat_tick (if set) after."""
        idle = self.config.idle_heartbeat_tick
        return idle if idle and self.ticks >= self.lease_wanted_until_tick else self.config.heartbeat_tick

    def _want_lease(self) -> None:
        """A write or a read came: keep the lease fresh (a heartbeat round every heartbeat_tick)
        for the next election timeout. Going sparse again later only ever shortens the lease
        (it lasts from the send tick of the last acked round), and the next read renews it
        through a ReadIndex round."""
        self.lease_wanted_until_tick = self.ticks + self.config.election_tick

    def _expire_unreported_snapshots(self) -> None:
        for pr in self.progress.values():
            if pr.state is PROGRESS_STATE.SNAPSHOT:
                pr.snapshot_timeouts += 1
                if pr.snapshot_timeouts >= SNAPSHOT_REPORT_TIMEOUT_ELECTIONS:
                    pr.pending_snapshot = 0
                    pr.become_probe()

    def _quorum_recently_active(self) -> bool:
        """CheckQuorum: a quorum of voters (learners do not count) answered since the last check."""
        active = {pid for pid, pr in self.progress.items() if pid == self.id or pr.recent_active}
        for pid, pr in self.progress.items():
            if pid != self.id:
                pr.recent_active = False
        return has_quorum(self.voters, active)

    # ================================================================ elections
    def _promotable(self) -> bool:
        return self.id in self.voters and self.repair is None

    def hup(self, campaign_type: CampaignType) -> None:
        if self.role is ROLE.LEADER or not self._promotable():
            return
        if self.log.unstable.snapshot is not None or self._has_unapplied_conf_changes():
            return  # would count votes against a stale voter set (pitfall 3)
        self.campaign(campaign_type)

    def _has_unapplied_conf_changes(self) -> bool:
        index = self.log.applied + 1
        while index <= self.log.committed:
            page = self.log.entries(index, self.log.committed + 1, SCAN_PAGE_BYTES)
            if any(e.type is ENTRY_TYPE.CONF_CHANGE for e in page):
                return True
            index = page[-1].index + 1
        return False

    def take_over(self, departed: str) -> None:
        """The application believes `departed`, our leader, is gone (its port refuses us): campaign
        at once, as if it had transferred leadership to us, but without its consent. Voters grant
        though they heard it lately (CAMPAIGN_TAKEOVER); every vote rule stays (up-to-date log, one
        vote per term). Whoever wins waits out the lease `departed` may still hold before
        committing (`_takeover_wait_ticks`): a refused connection does not prove a dead process.
        With PreVote the takeover asks for pre-votes first: a node that is itself cut off (every
        port refuses it) then never raises its term, which would depose the leader on heal."""
        if self.lead in (None, departed):
            self.hup(CAMPAIGN.PRE_TAKEOVER if self.config.pre_vote else CAMPAIGN.TAKEOVER)

    def campaign(self, campaign_type: CampaignType) -> None:
        if campaign_type in REAL_CAMPAIGN_AFTER:
            self.become_pre_candidate()
            vote_type, term = MT.PRE_VOTE, self.term + 1
        else:
            self.become_candidate()
            vote_type, term = MT.VOTE, self.term
        self.campaign_type = campaign_type
        self.vote_lease_ages[self.id] = self.lease_age
        if self._poll(self.id, True) is VoteResult.WON:
            self._won_campaign()
            return
        context = CAMPAIGN_CONTEXT.get(campaign_type, b"")
        last_index, last_term = self.log.last_index(), self.log.last_term()
        for voter in sorted(self.voters - {self.id}):
            self._send(
                Message(vote_type, voter, self.id, term=term, log_term=last_term,
                        index=last_index, context=context)
            )

    def _won_campaign(self) -> None:
        real_campaign = REAL_CAMPAIGN_AFTER.get(self.campaign_type)
        if real_campaign is not None:
            self.campaign(real_campaign)
        else:
            self.become_leader(self._takeover_wait_ticks())
            self._bcast_append()

    def _takeover_wait_ticks(self) -> int:
        """Ticks to wait before committing: the longest lease an earlier leader may still hold,
        from the lease ages our voters granted with (rmqc.reads._lease). None after a transfer
        (that leader gave its lease up first), none without CheckQuorum, none for a sole voter
        (no one else can hold a lease over a group of one). In a normal election the voters'
        stickiness makes it 0 unless lease_ticks is close to election_tick."""
        if not self.config.check_quorum or self.campaign_type is CAMPAIGN.TRANSFER:
            return 0  # without CheckQuorum there are no leases (Lease.valid)
        if self.voters == {self.id}:
            return 0
        lease_ticks = self.config.lease_bound_ticks
        granted = [age for voter, age in self.vote_lease_ages.items() if self.votes.get(voter)]
        return max((takeover_wait_ticks(lease_ticks, age) for age in granted), default=0)

    def _end_takeover_wait(self) -> None:
        self.commit_blocked_until_tick = 0
        self._commit_and_tell()

    def _poll(self, voter: str, granted: bool) -> VoteResult:
        """Record one vote (the first answer per voter counts) and tally the voter set."""
        self.votes.setdefault(voter, granted)
        return vote_result(self.voters, self.votes)

    def _candidate_log_up_to_date(self, last_term: int, last_index: int) -> bool:
        """Raft 5.4.1: grant only to a candidate whose log is at least as up to date as ours."""
        return self.log.is_up_to_date(last_index, last_term)

    def _in_lease(self) -> bool:
        """Sticky: ignore disruptive vote requests while a leader was heard within election_tick."""
        if not self.config.check_quorum:
            return False
        return self.role is ROLE.LEADER or self.leader_contact_elapsed < self.config.election_tick

    def _handle_vote_request(self, m: Message) -> None:
        if self.repair is not None:  # our log and vote may be missing what we promised
            self.repair.votes_refused += 1
            self._send(Message(VOTE_RESPONSE_OF[m.type], m.frm, self.id, term=self.term, reject=True))
            return
        can_vote = (
            self.vote == m.frm
            or (self.vote is None and self.lead is None)
            or (m.type is MT.PRE_VOTE and m.term > self.term)
        )
        response = VOTE_RESPONSE_OF[m.type]
        if (can_vote and self._votes_as_member(m.frm)
                and self._candidate_log_up_to_date(m.log_term, m.index)):
            # The grant echoes the request's term: a pre-vote is at term+1 (pitfall 1). A vote
            # carries our lease age, for the winner's takeover wait (rmqc.reads._lease).
            age = encode_lease_age(self.lease_age) if m.type is MT.VOTE else b""
            self._send(Message(response, m.frm, self.id, term=m.term, context=age))
            if m.type is MT.VOTE:
                self.election_elapsed = 0
                self.vote = m.frm
            elif self._yields_to(m):
                self.become_follower(self.term, None)
        else:
            self._send(Message(response, m.frm, self.id, term=self.term, reject=True))

    def _votes_as_member(self, candidate: str) -> bool:
        """Membership rules of a vote. A node that applied a candidate's removal refuses it: a
        removed node that does not know it (it never learned that its removal committed) must not
        be elected by the old membership, whose quorums need not overlap the new one's. A node that
        applied its own removal votes no more. A learner, candidate or voter, may be a voter not
        yet known as one (pitfall 22); a joining node with no membership yet refuses no one."""
        members = self.voters | self.learners
        return not members or (candidate in members and self.id in members)

    def _yields_to(self, m: Message) -> bool:
        """Two pre-candidates that timed out together (the same randomised tick after the same
        lost leader) both win their pre-votes and split the real vote, costing another election
        timeout. The one whose (last term, last index, id) is lower steps back when it grants the
        other's pre-vote for the same term; pre-votes change no term or vote, so this is safe."""
        if self.role is not ROLE.PRE_CANDIDATE or m.term != self.term + 1 or m.frm not in self.voters:
            return False  # a stranger (e.g. a removed node) could never win: keep campaigning
        return (m.log_term, m.index, m.frm) > (self.log.last_term(), self.log.last_index(), self.id)

    def _candidate_on_vote_response(self, m: Message) -> None:
        mine = MT.PRE_VOTE_RESP if self.role is ROLE.PRE_CANDIDATE else MT.VOTE_RESP
        if m.type is not mine:
            return  # a late pre-vote grant is no vote (pitfall 2)
        if m.type is MT.VOTE_RESP and not m.reject:
            self.vote_lease_ages.setdefault(m.frm, decode_lease_age(m.context))
        result = self._poll(m.frm, not m.reject)
        if result is VoteResult.WON:
            self._won_campaign()
        elif result is VoteResult.LOST:
            self.become_follower(self.term, None)

    # ================================================================ step
    def step(self, m: Message) -> None:
        if m.type in REPAIR_PROBE_TYPES:  # answered and counted whatever the terms (see _fenced)
            self._on_repair_probe(m)
            return
        if self.repair is not None and not self._fenced() and m.type in LEADER_TO_FOLLOWER:
            self._unfenced_leader_message(m)
            return
        if m.type in LOCAL_TYPES:
            pass
        elif m.term > self.term:
            if not self._step_higher_term(m):
                return
        elif m.term < self.term:
            self._step_lower_term(m)
            return
        if m.type in VOTE_RESPONSE_OF:  # a vote request, answered the same way in every role
            self._handle_vote_request(m)
            return
        handler = self._role_handlers[self.role].get(m.type)
        if handler is not None:
            handler(m)

    def _step_higher_term(self, m: Message) -> bool:
        """Returns False if the message is to be ignored."""
        if m.type in VOTE_RESPONSE_OF and m.context not in DISRUPTIVE_CAMPAIGNS and self._in_lease():
            return False  # a removed or partitioned node must not depose us (pitfall 21)
        if m.type is MT.PRE_VOTE or (m.type is MT.PRE_VOTE_RESP and not m.reject):
            return True  # pre-votes never move terms (pitfall 1)
        leader = m.frm if m.type in (MT.APP, MT.HEARTBEAT, MT.SNAP) else None
        self.become_follower(m.term, leader)
        return True

    def _step_lower_term(self, m: Message) -> None:
        if m.type in (MT.APP, MT.HEARTBEAT) and (self.config.check_quorum or self.config.pre_vote):
            # Tell a stale leader our term, or a node stranded above it never rejoins (pitfall 34).
            self._send(Message(MT.APP_RESP, m.frm, self.id, term=self.term))
        elif m.type is MT.PRE_VOTE:
            self._send(Message(MT.PRE_VOTE_RESP, m.frm, self.id, term=self.term, reject=True))

    def _handlers(self) -> dict[Role, dict[MessageType, Callable[[Message], None]]]:
        follower: dict[MessageType, Callable[[Message], None]] = {
            MT.APP: self._follower_on_append,
            MT.HEARTBEAT: self._follower_on_heartbeat,
            MT.SNAP: self._follower_on_snapshot,
            MT.TIMEOUT_NOW: self._follower_on_timeout_now,
            MT.READ_INDEX_RESP: self._follower_on_read_index_resp,
            MT.REPAIR_ACK: self._follower_on_repair_ack,
        }
        candidate: dict[MessageType, Callable[[Message], None]] = {
            MT.APP: self._follower_on_append,
            MT.HEARTBEAT: self._follower_on_heartbeat,
            MT.SNAP: self._follower_on_snapshot,
            MT.VOTE_RESP: self._candidate_on_vote_response,
            MT.PRE_VOTE_RESP: self._candidate_on_vote_response,
        }
        leader: dict[MessageType, Callable[[Message], None]] = {
            MT.APP_RESP: self._leader_on_append_resp,
            MT.HEARTBEAT_RESP: self._leader_on_heartbeat_resp,
            MT.SNAP_STATUS: self._leader_on_snap_status,
            MT.UNREACHABLE: self._leader_on_unreachable,
            MT.TRANSFER_LEADER: self._leader_on_transfer,
            MT.READ_INDEX: self._leader_on_read_index,
            MT.REPAIR: self._leader_on_repair,
        }
        return {
            ROLE.FOLLOWER: follower,
            ROLE.PRE_CANDIDATE: candidate,
            ROLE.CANDIDATE: candidate,
            ROLE.LEADER: leader,
        }

    def _send(self, m: Message) -> None:
        (self.msgs_after_persist if m.type in AFTER_PERSIST else self.msgs).append(m)

    # ================================================================ follower side
    def _heard_from_leader(self, m: Message) -> None:
        if self.role is not ROLE.FOLLOWER:
            self.become_follower(m.term, m.frm)
        self.election_elapsed = 0
        self.leader_contact_elapsed = 0
        self.lease_age = 0
        self.lead = m.frm
        if self.repair is not None:
            self._signal_repair(m.frm)

    def _follower_on_append(self, m: Message) -> None:
        self._heard_from_leader(m)
        if m.index < self.log.committed:
            # Already committed here (maybe compacted): say so instead of rejecting (pitfall 14).
            self._send(Message(MT.APP_RESP, m.frm, self.id, term=self.term, index=self.log.committed))
            return
        last_new = self.log.maybe_append(m.index, m.log_term, m.commit, m.entries)
        if last_new is not None:
            self._send(Message(MT.APP_RESP, m.frm, self.id, term=self.term, index=last_new))
            return
        hint_index, hint_term = self.log.find_conflict_by_term(
            min(m.index, self.log.last_index()), m.log_term
        )
        self._send(
            Message(MT.APP_RESP, m.frm, self.id, term=self.term, index=m.index, reject=True,
                    reject_hint=hint_index, log_term=hint_term)
        )

    def _follower_on_heartbeat(self, m: Message) -> None:
        self._heard_from_leader(m)
        self.log.commit_to(min(m.commit, self.log.last_index()))
        self._send(Message(MT.HEARTBEAT_RESP, m.frm, self.id, term=self.term, context=m.context))

    def _follower_on_snapshot(self, m: Message) -> None:
        self._heard_from_leader(m)
        assert m.snapshot is not None, "SNAP without a snapshot"
        index = self.log.last_index() if self._restore(m.snapshot) else self.log.committed
        self._send(Message(MT.APP_RESP, m.frm, self.id, term=self.term, index=index))

    def _restore(self, snap: Snapshot) -> bool:
        """Install a snapshot; False if it is stale, not for us, or our log already matches it."""
        meta = snap.meta
        if meta.index <= self.log.committed:
            return False  # a delayed duplicate must not rewind state (pitfall 13)
        if self._refuses_membership_of(meta.conf_state):
            return False  # a config without us (pitfall 17)
        if self.log.match_term(meta.index, meta.term):
            self.log.commit_to(meta.index)  # keep the matching suffix, only move commit
            return False
        self.log.restore(snap)
        self._set_conf_state(meta.conf_state)
        return True

    def _refuses_membership_of(self, conf_state: ConfState) -> bool:
        """A snapshot whose membership lacks us is refused (pitfall 17), except by a joining node
        that has no membership yet: the leader's snapshot may predate our addition, whose entry
        follows it in the log (we never campaign without being a voter)."""
        joining = not (self.voters or self.learners)
        return not joining and self.id not in conf_state.voters and self.id not in conf_state.learners

    def _follower_on_timeout_now(self, m: Message) -> None:
        if m.index != self.log.last_index():
            return  # bound to the sender's last index: a stale TimeoutNow is ignored (pitfall 24)
        self.hup(CAMPAIGN.TRANSFER)

    # ================================================================ repair
    # A node whose storage was found damaged (rmqc.storage) restarts with what survived and
    # `repairing` set. It may have acked entries it no longer holds, counted by a leader toward
    # commits, and voted in a term it no longer remembers. Until its log holds, durably, the
    # commit index of a leader that has forgotten those acks, it neither votes nor campaigns:
    # every leader elected meanwhile is elected without it, so the surviving copies of what was
    # committed with its lost acks decide (docs/operations.md, "Damaged storage").
    def _signal_repair(self, leader: str) -> None:
        """Tell `leader` what we hold, until it answers; again after an election timeout (the
        message or its answer may be lost, or the leader may not yet have committed in its term)."""
        repair = self.repair
        assert repair is not None
        if repair.target is not None:
            return
        if repair.signalled == (self.term, leader) and self.ticks - repair.signalled_tick < self.config.election_tick:
            return
        repair.signalled, repair.signalled_tick = (self.term, leader), self.ticks
        self._send(Message(MT.REPAIR, leader, self.id, term=self.term, index=self.log.last_index()))

    def _leader_on_repair(self, m: Message) -> None:
        pr = self.progress.get(m.frm)
        if pr is None:
            return
        pr.forget_after(min(m.index, self.log.last_index()))
        if self.own_term_committed:  # before that our commit index may lag what earlier leaders committed
            self._send(Message(MT.REPAIR_ACK, m.frm, self.id, term=self.term, commit=self.log.committed,
                               log_term=self.log.term(self.log.committed)))
        self._maybe_send_append(m.frm, send_if_empty=True)

    def _follower_on_repair_ack(self, m: Message) -> None:
        if self.repair is None or self.repair.target is not None:
            return
        self.repair.target = (m.commit, m.log_term)
        self.maybe_end_repair()

    def maybe_end_repair(self) -> None:
        """The repair is over once the target entry is durable here (or under our snapshot)."""
        repair = self.repair
        if repair is None or repair.target is None:
            return
        if self.log.unstable.snapshot is not None:
            return  # a snapshot received but not yet saved: stable_last_index already counts it
        index, term = repair.target
        covered = index <= self.log.storage.first_index() - 1  # under our durable snapshot
        if covered or (index <= self.log.stable_last_index() and self.log.match_term(index, term)):
            self.ended_repair, self.repair = repair, None

    # Its lost hard state may have held a higher term than the one its log ends in: as a voter of
    # that term it promised to refuse the appends of any older leader, and a stale leader (cut off,
    # still leading an older term) could otherwise commit with its acks entries that conflict with
    # what the newer leader committed with the same node's acks. Before it acts on any append it
    # asks every voter its term and takes the highest a majority reports (the quorum that elected
    # any newer leader with its vote has a member in every majority of the others).
    def _fenced(self) -> bool:
        repair = self.repair
        return repair is None or repair.fence_term is not None

    def _probe_for_fence(self) -> None:
        repair = self.repair
        assert repair is not None
        if repair.probed_tick is not None and self.ticks - repair.probed_tick < self.config.heartbeat_tick:
            return
        repair.probed_tick = self.ticks
        for voter in sorted(self._fence_voters() - {self.id} - set(repair.terms_heard)):
            self._send(Message(MT.REPAIR_PROBE, voter, self.id, term=self.term))

    def _fence_voters(self) -> set[str]:
        return set(self.voters) or set(self.config.repair_peers)

    def _on_repair_probe(self, m: Message) -> None:
        if m.type is MT.REPAIR_PROBE:
            self._send(Message(MT.REPAIR_PROBE_RESP, m.frm, self.id, term=self.term))
            return
        repair = self.repair
        if repair is None or repair.fence_term is not None:
            return
        repair.terms_heard[m.frm] = m.term
        voters = self._fence_voters()
        if voters and has_quorum(voters, repair.terms_heard):
            repair.fence_term = max(term for voter, term in repair.terms_heard.items() if voter in voters)
            if repair.fence_term > self.term:
                self.become_follower(repair.fence_term, None)

    def _unfenced_leader_message(self, m: Message) -> None:
        """Until the fence is known, appends and heartbeats get no answer (no ack helps any leader
        commit). A snapshot is installed, unacknowledged: its state is committed, and it brings the
        membership to probe when the storage lost it."""
        if m.type is MT.SNAP and m.term >= self.term and m.snapshot is not None and not self._fence_voters():
            self._restore(m.snapshot)
        self._probe_for_fence()

    def _follower_on_read_index_resp(self, m: Message) -> None:
        self.read_states.append(ReadState(m.index, m.context))

    # ================================================================ leader: proposals
    def check_can_propose(self, decided_term: int | None = None) -> None:
        if self.role is not ROLE.LEADER:
            raise NoLeader(self.id) if self.lead is None else NotLeader(self.id, self.lead)
        if self.lead_transferee is not None:
            raise TransferInProgress(self.lead_transferee)
        if decided_term is not None and decided_term != self.term:
            raise StaleTermProposal(decided_term, self.term)

    def propose_batch(self, datas: Sequence[bytes], decided_term: int | None = None) -> None:
        self.check_can_propose(decided_term)
        if not datas:
            return
        self._append_entries([(ENTRY_TYPE.NORMAL, bytes(d)) for d in datas])
        self._bcast_append()

    def propose_conf_change(self, cc: ConfChange) -> None:
        self.check_can_propose()
        if self.conf_change_pending():
            raise ConfChangeRefused(
                f"conf change refused: change at {self.pending_conf_index} not applied yet "
                f"(applied {self.log.applied})"
            )
        if not self.own_term_committed:
            raise ConfChangeRefused(
                f"conf change refused: no entry of term {self.term} committed yet (pitfall 18)"
            )
        if not self._conf_change_leaves_voters(cc):
            raise ConfChangeRefused(f"conf change refused: {cc.type.name} {cc.node_id} leaves no voter")
        self._append_entries([(ENTRY_TYPE.CONF_CHANGE, encode_conf_change(cc))])
        self.pending_conf_index = self.log.last_index()
        self._bcast_append()

    def conf_change_pending(self) -> bool:
        """A membership change is in the log and not applied yet: no other may be proposed
        (pitfall 19; the `two-pending-changes` mutant breaks this rule)."""
        return self.pending_conf_index > self.log.applied

    def _conf_change_leaves_voters(self, cc: ConfChange) -> bool:
        return conf_state_after(self.conf_state(), cc) is not None

    def _append_entries(self, payloads: Sequence[tuple[EntryType, bytes]]) -> None:
        """Stamp (type, data) pairs with our term and the next indexes, and append them."""
        self._want_lease()  # a write (the no-op of a new leader too): reads are likely to follow
        size = sum(len(data) for _, data in payloads)
        limit = self.config.max_uncommitted_size
        # Empty entries are never refused, and anything fits an empty tail (pitfall 38).
        if size and self.uncommitted_size and self.uncommitted_size + size > limit:
            raise UncommittedSizeExceeded(self.uncommitted_size, size, limit)
        first, term = self.log.last_index() + 1, self.term
        stamped = [Entry(first + i, term, kind, data) for i, (kind, data) in enumerate(payloads)]
        self.log.append(stamped)
        self._uncommitted.extend((e.index, len(e.data)) for e in stamped if e.data)
        self.uncommitted_size += size

    def _track_inherited_tail(self) -> None:
        index = self.log.committed + 1
        last = self.log.last_index()
        while index <= last:
            page = self.log.entries(index, last + 1, SCAN_PAGE_BYTES)
            for e in page:
                if e.data:
                    self._uncommitted.append((e.index, len(e.data)))
                    self.uncommitted_size += len(e.data)
            index = page[-1].index + 1

    # ================================================================ leader: replication
    def _bcast_append(self, send_if_empty: bool = True) -> None:
        for peer in self.peer_order:
            if peer != self.id:
                self._maybe_send_append(peer, send_if_empty=send_if_empty)

    def _commit_and_tell(self) -> bool:
        """Commit what a quorum holds; if the commit index moved: its bookkeeping, then appends to
        whoever has entries to get, and empty ones too unless Config.commit_broadcast is off and
        nothing committed now is a membership change or this term's first entry (a leader commits
        only entries of its term, so the first one is in the range when the entry at the old
        commit index is of another term). True when it moved."""
        committed_before = self.log.committed
        if not self._maybe_commit():
            return False
        self._on_commit_advanced()
        urgent = (committed_before < self.pending_conf_index <= self.log.committed
                  or not self.log.match_term(committed_before, self.term))
        self._bcast_append(send_if_empty=self.config.commit_broadcast or urgent)
        return True

    def _maybe_send_append(self, to: str, send_if_empty: bool) -> bool:
        pr = self.progress[to]
        if pr.is_paused():
            return False
        if not send_if_empty and pr.next > self.log.last_index():
            # nothing new for it: most calls at low load (after each ack, at each commit). The term
            # at pr.next - 1 (the last index) is always known, so no snapshot can be due here.
            return False
        try:
            prev_term = self.log.term(pr.next - 1)
            entries = self._entries_for(pr)
        except CompactedError:
            return self._maybe_send_snapshot(to, pr)  # never guess a compacted term (pitfall 15)
        if not entries and not send_if_empty:
            return False
        size = entries_size(entries)
        self._send(
            Message(MT.APP, to, self.id, term=self.term, index=pr.next - 1, log_term=prev_term,
                    entries=tuple(entries), commit=self.log.committed)
        )
        pr.sent_append(entries[-1].index if entries else None, size, self.ticks, self.heartbeat_round)
        return True

    def _entries_for(self, pr: Progress) -> list[Entry]:
        if not pr.can_send_entries():
            return []
        # A probe may well be rejected (the follower's log diverges or is shorter): it carries only
        # the few entries that spare a new leader's no-op a round trip. The bulk of a catch-up
        # goes in REPLICATE, paced by the in-flight window.
        count = PROBE_ENTRIES if pr.state is PROGRESS_STATE.PROBE else self.config.max_entries_per_msg
        hi = min(pr.next + count, self.log.last_index() + 1)
        return self.log.entries(pr.next, hi, self.config.max_size_per_msg)

    def _maybe_send_snapshot(self, to: str, pr: Progress) -> bool:
        if not pr.recent_active:
            return False  # do not ship a snapshot to a peer that may be down
        snap = self.log.storage.snapshot()
        if snap.is_empty:
            raise RaftInvariantError(f"entries for {to} are compacted but storage has no snapshot")
        pr.become_snapshot(snap.meta.index)
        self._send(Message(MT.SNAP, to, self.id, term=self.term, snapshot=snap))
        return True

    def _leader_on_append_resp(self, m: Message) -> None:
        pr = self.progress.get(m.frm)
        if pr is None or m.index > self.log.last_index():
            return  # a stranger, or an ack of entries this leader never had (not from our term)
        pr.recent_active = True
        if m.reject:
            self._leader_on_append_reject(m, pr)
            return
        was_paused = pr.is_paused()
        if not (pr.maybe_update(m.index) or (pr.match == m.index and pr.state is PROGRESS_STATE.PROBE)):
            return  # stale or duplicate (pitfall 7)
        self._progress_after_ack(pr, m.index)
        if not self._commit_and_tell() and was_paused:
            self._maybe_send_append(m.frm, send_if_empty=True)
        while self._maybe_send_append(m.frm, send_if_empty=False):
            pass  # pipelining, bounded by the in-flight window
        if m.frm == self.lead_transferee and pr.match == self.log.last_index():
            self._send_timeout_now(m.frm)

    def _progress_after_ack(self, pr: Progress, index: int) -> None:
        if pr.state is PROGRESS_STATE.PROBE:
            pr.become_replicate()
        elif pr.state is PROGRESS_STATE.SNAPSHOT and pr.match + 1 >= self.log.first_index():
            # Any applied snapshot that lets the follower continue will do (pitfall 16).
            pr.become_probe()
            pr.become_replicate()
        elif pr.state is PROGRESS_STATE.REPLICATE:
            pr.acked_replicate(index)

    def _leader_on_append_reject(self, m: Message, pr: Progress) -> None:
        next_probe = m.reject_hint
        if m.log_term > 0:
            next_probe, _ = self.log.find_conflict_by_term(m.reject_hint, m.log_term)
        if pr.maybe_decrease_to(m.index, next_probe):
            if pr.state is PROGRESS_STATE.REPLICATE:
                pr.become_probe()
            self._maybe_send_append(m.frm, send_if_empty=True)

    def _maybe_commit(self) -> bool:
        """Commit the quorum-replicated index, but only if its entry is of our term (Raft 5.4.2),
        and not before a takeover's wait is over: whatever we commit may be acknowledged or read."""
        if self.commit_blocked_until_tick:
            return False
        match = {pid: pr.match for pid, pr in self.progress.items()}
        return self.log.maybe_commit(committed_index(self.voters, match), self.term)

    def _on_commit_advanced(self) -> None:
        while self._uncommitted and self._uncommitted[0][0] <= self.log.committed:
            self.uncommitted_size -= self._uncommitted.popleft()[1]
        if not self.own_term_committed and self.log.match_term(self.log.committed, self.term):
            self.own_term_committed = True
            self.reads.release_held(self.log.committed)
            if self.reads.has_queued():
                self._bcast_heartbeat()

    def on_persisted(self, last_index: int) -> None:
        """The app persisted our entries up to last_index; a leader may now count itself."""
        if self.role is not ROLE.LEADER:
            return
        if self.progress[self.id].maybe_update(last_index):
            self._commit_and_tell()

    def _leader_on_snap_status(self, m: Message) -> None:
        pr = self.progress.get(m.frm)
        if pr is None or pr.state is not PROGRESS_STATE.SNAPSHOT:
            return
        if m.reject:
            pr.pending_snapshot = 0  # clear before probing again (pitfall 16)
        pr.become_probe()
        pr.flow_paused = True  # wait for an append reply or a heartbeat before sending more

    def _leader_on_unreachable(self, m: Message) -> None:
        pr = self.progress.get(m.frm)
        if pr is not None and pr.state is PROGRESS_STATE.REPLICATE:
            pr.become_probe()

    # ================================================================ leader: heartbeats and reads
    def _bcast_heartbeat(self) -> None:
        round_id = self.reads.begin_round(self.ticks)
        self.heartbeat_round = round_id
        context = encode_round_id(round_id)
        for peer in self.peer_order:
            if peer != self.id:
                commit = min(self.progress[peer].match, self.log.committed)
                self._send(Message(MT.HEARTBEAT, peer, self.id, term=self.term, commit=commit,
                                   context=context))
        self._ack_round(round_id, self.id)

    def _leader_on_heartbeat_resp(self, m: Message) -> None:
        pr = self.progress.get(m.frm)
        if pr is None:
            return
        pr.recent_active = True
        round_id = decode_round_id(m.context)
        pr.may_resume(self.ticks, round_id, self.config.probe_retry_ticks)
        if pr.match < self.log.last_index() or pr.state is PROGRESS_STATE.PROBE:
            self._maybe_send_append(m.frm, send_if_empty=True)
        if round_id is not None:
            self._ack_round(round_id, m.frm)

    def _ack_round(self, round_id: int, voter: str) -> None:
        if voter not in self.voters:
            return
        confirmed = self.reads.ack(round_id, voter, lambda acks: has_quorum(self.voters, acks))
        if confirmed is None:
            return
        self.lease.confirmed(confirmed.sent_tick)
        for request in confirmed.reads:
            self._answer_read(request)
        if self.reads.has_queued():
            self._bcast_heartbeat()  # reads that arrived during that round share the next one

    def _answer_read(self, request: ReadRequest) -> None:
        if request.requester == self.id:
            self.read_states.append(ReadState(request.index, request.context))
        else:
            self._send(Message(MT.READ_INDEX_RESP, request.requester, self.id, term=self.term,
                               index=request.index, context=request.context))

    def read_index(self, context: bytes) -> None:
        if self.role is ROLE.LEADER:
            self._leader_read(context, self.id)
        elif self.lead is None:
            raise ReadIndexDropped(f"read index dropped on {self.id}: no leader known")
        else:
            self._send(Message(MT.READ_INDEX, self.lead, self.id, term=self.term, context=context))

    def _leader_on_read_index(self, m: Message) -> None:
        self._leader_read(m.context, m.frm)

    def _leader_read(self, context: bytes, requester: str) -> None:
        self._want_lease()
        self.reads.add(context, requester, self.log.committed, self._read_index_ready())
        if self._read_index_ready() and not self.reads.reads_in_flight():
            self._bcast_heartbeat()

    def _read_index_ready(self) -> bool:
        """No read index before the leader committed an entry of its own term (pitfall 26)."""
        return self.own_term_committed

    def _lease_valid(self) -> bool:
        """Lease reads: CheckQuorum lease within its drift-bounded duration, own-term commit,
        no transfer pending and the post-transfer fence committed (pitfall 24)."""
        return (
            self.role is ROLE.LEADER
            and self.lease.valid(self.ticks)
            and self.own_term_committed
            and self.lead_transferee is None
            and self.log.committed >= self.lease_fence_index
        )

    def lease_read(self) -> int | None:
        if self.role is ROLE.LEADER:
            self._want_lease()
        return self.log.committed if self._lease_valid() else None

    # ================================================================ leadership transfer
    def transfer_leader(self, target: str) -> None:
        if self.role is ROLE.LEADER:
            self._leader_on_transfer(Message(MT.TRANSFER_LEADER, self.id, self.id, context=target.encode()))
        elif self.lead is not None:
            self._send(Message(MT.TRANSFER_LEADER, self.lead, self.id, term=self.term,
                               context=target.encode()))
        else:
            raise NoLeader(self.id)

    def _leader_on_transfer(self, m: Message) -> None:
        target = m.context.decode() if m.context else m.frm
        if target not in self.voters:
            return  # learners and strangers cannot lead (pitfall 22)
        if self.commit_blocked_until_tick:
            return  # the target would skip the wait for an older leader's lease: not yet
        if self.lead_transferee is not None:
            if self.lead_transferee == target:
                return  # repeated request (pitfall 25)
            self._abort_transfer(fence=True)
        if target == self.id:
            return
        self.election_elapsed = 0  # the transfer must finish within one election timeout
        self.lead_transferee = target
        self.lease.expire()  # expire the lease before transferring (thesis 6.4.1)
        if self.progress[target].match == self.log.last_index():
            self._send_timeout_now(target)
        else:
            self._maybe_send_append(target, send_if_empty=True)

    def _send_timeout_now(self, to: str) -> None:
        self._send(Message(MT.TIMEOUT_NOW, to, self.id, term=self.term, index=self.log.last_index()))

    def _abort_transfer(self, fence: bool) -> None:
        self.lead_transferee = None
        if fence and self.role is ROLE.LEADER:
            # A TimeoutNow may still be in flight; the lease stays off until an entry appended
            # after the abort commits, which the late target can no longer win against.
            self._append_entries([(ENTRY_TYPE.NORMAL, b"")])
            self.lease_fence_index = self.log.last_index()
            self._bcast_append()

    # ================================================================ membership
    def _rebuild_progress(self) -> None:
        members = self.voters | self.learners
        for pid in list(self.progress):
            if pid not in members:
                del self.progress[pid]
        for pid in members:
            if pid not in self.progress:
                self.progress[pid] = self._new_progress()
        self.peer_order = sorted(members)

    def _set_conf_state(self, conf_state: ConfState) -> None:
        self.voters = set(conf_state.voters)
        self.learners = set(conf_state.learners)
        self._rebuild_progress()

    def conf_state(self) -> ConfState:
        return ConfState(voters=tuple(sorted(self.voters)), learners=tuple(sorted(self.learners)))

    def apply_conf_change(self, cc: ConfChange) -> ConfState:
        after = conf_state_after(self.conf_state(), cc)
        if after is None:
            return self.conf_state()  # validated at proposal; never apply an empty voter set
        self._set_conf_state(after)
        if self.role is ROLE.LEADER:
            self._leader_after_conf_change()
        return self.conf_state()

    def _leader_after_conf_change(self) -> None:
        if self.id not in self.voters:
            self.become_follower(self.term, None)  # a removed leader steps down (pitfall 20)
            return
        if self.lead_transferee is not None and self.lead_transferee not in self.voters:
            self._abort_transfer(fence=True)
        if self._maybe_commit():
            self._on_commit_advanced()
        self._bcast_append()

    # ================================================================ ready support
    def hard_state(self) -> HardState:
        return HardState(term=self.term, vote=self.vote, commit=self.log.committed)


def _is_brand_new(storage: Storage, hard_state: HardState, conf_state: ConfState) -> bool:
    return (
        hard_state == HardState()
        and not conf_state.voters
        and not conf_state.learners
        and storage.last_index() == 0
        and storage.snapshot().is_empty
    )
