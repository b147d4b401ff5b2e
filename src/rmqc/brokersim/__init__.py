"""rmqc.brokersim: simulated RocketMQ brokers in controller mode (spec section 7), thousands per process.

`BrokerFleet` runs the broker lifecycle against real controllers over TCP (identity files, 1005,
1012/1013/1003, heartbeats, 1002, 1004 polling, 1001 shrink/expand, 1008, and 103 to every rmqc
node as its NameServer, with a topic table per group), can kill, hang and lag
brokers, and reports what each broker believes so tests can assert convergence.
"""

from rmqc.brokersim._broker import SimBroker as SimBroker
from rmqc.brokersim._control import CONTROL_HELP as CONTROL_HELP, run_control_line as run_control_line
from rmqc.brokersim._errors import (
    FleetTooLarge as FleetTooLarge,
    IdentityMismatch as IdentityMismatch,
    NotConverged as NotConverged,
    RegistrationFailed as RegistrationFailed,
    SimError as SimError,
    UnknownBroker as UnknownBroker,
)
from rmqc.brokersim._fleet import (
    DEFAULT_CLUSTER as DEFAULT_CLUSTER,
    DEFAULT_TOPICS_PER_BROKER as DEFAULT_TOPICS_PER_BROKER,
    MAX_BROKERS_PER_FLEET as MAX_BROKERS_PER_FLEET,
    BrokerFleet as BrokerFleet,
    group_name as group_name,
    topic_table as topic_table,
)
from rmqc.brokersim._identity import FINAL_FILE as FINAL_FILE, TEMP_FILE as TEMP_FILE, IdentityStore as IdentityStore
from rmqc.brokersim._model import (
    BrokerBelief as BrokerBelief,
    Phase as Phase,
    Role as Role,
    SimTiming as SimTiming,
    Status as Status,
    convergence_problems as convergence_problems,
    expanded_set as expanded_set,
    shrunk_set as shrunk_set,
)

__all__ = [
    "CONTROL_HELP",
    "DEFAULT_CLUSTER",
    "DEFAULT_TOPICS_PER_BROKER",
    "FINAL_FILE",
    "MAX_BROKERS_PER_FLEET",
    "TEMP_FILE",
    "BrokerBelief",
    "BrokerFleet",
    "FleetTooLarge",
    "IdentityMismatch",
    "IdentityStore",
    "NotConverged",
    "Phase",
    "RegistrationFailed",
    "Role",
    "SimBroker",
    "SimError",
    "SimTiming",
    "Status",
    "UnknownBroker",
    "convergence_problems",
    "expanded_set",
    "group_name",
    "run_control_line",
    "shrunk_set",
    "topic_table",
]
