"""rmqc.brokersim: simulated RocketMQ brokers in controller mode (spec section 7), thousands per process.

`BrokerFleet` runs the broker lifecycle against real controllers over TCP (identity files, 1005,
1012/1013/1003, heartbeats, 1002, 1004 polling, 1001 shrink/expand, 1008), can kill, hang and lag
brokers, and reports what each broker believes so tests can assert convergence.
"""

from rmqc.brokersim._broker import SimBroker as SimBroker
from rmqc.brokersim._control import CONTROL_HELP as CONTROL_HELP
from rmqc.brokersim._control import run_control_line as run_control_line
from rmqc.brokersim._errors import FleetTooLarge as FleetTooLarge
from rmqc.brokersim._errors import IdentityMismatch as IdentityMismatch
from rmqc.brokersim._errors import NotConverged as NotConverged
from rmqc.brokersim._errors import RegistrationFailed as RegistrationFailed
from rmqc.brokersim._errors import SimError as SimError
from rmqc.brokersim._errors import UnknownBroker as UnknownBroker
from rmqc.brokersim._fleet import DEFAULT_CLUSTER as DEFAULT_CLUSTER
from rmqc.brokersim._fleet import MAX_BROKERS_PER_FLEET as MAX_BROKERS_PER_FLEET
from rmqc.brokersim._fleet import BrokerFleet as BrokerFleet
from rmqc.brokersim._fleet import group_name as group_name
from rmqc.brokersim._identity import FINAL_FILE as FINAL_FILE
from rmqc.brokersim._identity import TEMP_FILE as TEMP_FILE
from rmqc.brokersim._identity import IdentityStore as IdentityStore
from rmqc.brokersim._model import BrokerBelief as BrokerBelief
from rmqc.brokersim._model import Phase as Phase
from rmqc.brokersim._model import Role as Role
from rmqc.brokersim._model import SimTiming as SimTiming
from rmqc.brokersim._model import Status as Status
from rmqc.brokersim._model import convergence_problems as convergence_problems
from rmqc.brokersim._model import expanded_set as expanded_set
from rmqc.brokersim._model import shrunk_set as shrunk_set

__all__ = [
    "CONTROL_HELP",
    "DEFAULT_CLUSTER",
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
]
