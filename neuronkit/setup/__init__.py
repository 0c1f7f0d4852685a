"""Setup, the bottom layer: the machine (device, Neuron stack, compile caches, doctor), the
process (rank) and the model (loading, placement, the embedded tiny model, the Hub). Imports no
other layer of neuronkit."""
