"""Pure logic: placement on a fleet — GPUs (gpus), addresses and port blocks of the slots
(slots), ports shared between deployments (ports), and deployments placed one after another
(placer). Below the drivers: nothing here does I/O."""
