"""Shared pytest configuration: the simulator fixture `geppetto_sim` for every test."""

pytest_plugins = ["geppetto.simulator.pytest_plugin"]
