"""Facts: the typed records (`records`), the one reader of sizing/data (`lookup`), model architectures
from config.json (`architectures`, `hf_config`), the hub's checkpoint metadata (`checkpoint_metadata`, the
one network edge besides adapters/), platform settings (`platform`) and where weights come from.
"""
