"""The engine model: how an inference engine runs a load on given hardware — step times and
KV memory (perf.py), the continuous-batching scheduler in virtual time (predict.py), the
made-up tokenizer and prompt blocks, the statistics of a prediction and the fitted constants
with their error intervals. A library with no server: the simulator (engines/sim) serves it,
bench and optimize predict with it."""
