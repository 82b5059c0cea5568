"""Live GPU utilization from DCGM exporter metrics: idle-capacity advice and placement hints."""
