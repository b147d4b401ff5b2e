"""rmqc.migrate: take over broker groups from a running Java RocketMQ controller (`rmqc migrate
from-java`, docs/operations.md "Migrating from the Java controller").

The Java controller is read over its own wire (1005 for the leader, 1006, 1004 and 1012 per group;
the group names from the NameServer's 106, since Java offers no list of its groups), the groups are
written into rmqc as one replicated ImportGroups (RMQC_IMPORT_GROUPS), and both sides are asked the
same questions again and compared field by field. `_views` is pure; `_run` talks through
ControllerClient instances it is given (it opens no socket of its own).
"""

from ._errors import MigrationError as MigrationError, MigrationRefused as MigrationRefused
from ._run import (
    Migration as Migration,
    group_names_from_namesrv as group_names_from_namesrv,
    import_rows as import_rows,
    java_leader as java_leader,
    migrate as migrate,
    read_views as read_views,
    verify as verify,
)
from ._views import (
    Difference as Difference,
    GroupView as GroupView,
    diff_views as diff_views,
    row_of_view as row_of_view,
    views_of_answers as views_of_answers,
)
