# Checkpoints written before trainer/ moved into subpackages pickle this class by this module's path: kept loadable.
from trainer.rank.optim import CompactGaLoreProjector  # noqa: F401
