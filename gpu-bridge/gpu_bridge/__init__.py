"""gpu-bridge: the trainer and server that crucible's Learner drives.

Importable with torch alone; the `hf` backend imports transformers/peft lazily.
"""

__version__ = "0.1.0"
PROTOCOL_VERSION = 1
