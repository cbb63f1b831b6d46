"""The catalog layer: hardware, offers, workload profiles, recipes and results indexes;
latency targets, cost and the ranking behind `denv bench`. Pure logic unless a module
says otherwise: callers pass the loaded files in."""
