"""Seeded synthetic histories for `rmqc analyze`: controller exports and client histories.

    from rmqc.pipeline import synth
    history = synth.write_history(synth.SynthConfig(groups=1000, plant={"broker_id_reused": 2}),
                                  "history.parquet")
    history.planted   # [PlantedViolation(kind, controller_cluster, broker_name, index, seq), ...]
"""

from ._synth import (
    ARROW_SCHEMA as ARROW_SCHEMA,
    DAY_MS as DAY_MS,
    PlantedViolation as PlantedViolation,
    SynthConfig as SynthConfig,
    SynthHistory as SynthHistory,
    broker_name_of as broker_name_of,
    controller_cluster_names as controller_cluster_names,
    generate_history as generate_history,
    lay_out as lay_out,
    write_history as write_history,
    write_jsonl_table as write_jsonl_table,
)
from ._synth_clients import PlantedStaleRead as PlantedStaleRead, generate_client_history as generate_client_history
from ._synth_script import PLANTABLE_KINDS as PLANTABLE_KINDS
