"""Seeded synthetic histories for `rmqc analyze`: controller exports and client histories.

    from rmqc.pipeline import synth
    history = synth.write_history(synth.SynthConfig(groups=1000, plant={"broker_id_reused": 2}),
                                  "history.parquet")
    history.planted   # [PlantedViolation(kind, controller_cluster, broker_name, index, seq), ...]
"""

from ._synth import ARROW_SCHEMA as ARROW_SCHEMA
from ._synth import DAY_MS as DAY_MS
from ._synth import PlantedViolation as PlantedViolation
from ._synth import SynthConfig as SynthConfig
from ._synth import SynthHistory as SynthHistory
from ._synth import broker_name_of as broker_name_of
from ._synth import controller_cluster_names as controller_cluster_names
from ._synth import generate_history as generate_history
from ._synth import lay_out as lay_out
from ._synth import write_history as write_history
from ._synth import write_jsonl_table as write_jsonl_table
from ._synth_clients import PlantedStaleRead as PlantedStaleRead
from ._synth_clients import generate_client_history as generate_client_history
from ._synth_script import PLANTABLE_KINDS as PLANTABLE_KINDS
