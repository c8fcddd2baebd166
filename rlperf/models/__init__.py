"""Policy networks: the study's VisionNetwork as a torch module and an RLlib RLModule."""
