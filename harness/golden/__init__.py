"""Job 1, graph goldens: capture a model with five front ends (capture), print each graph
canonically (canonical, normalize), keep one golden file per model and front end (store), and
compare or accept them from pytest (plugin). Imports only harness.core."""
