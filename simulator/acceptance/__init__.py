"""The acceptance and verdict model: the model itself, its fit to verdict logs, its ranges, simulated verdict records."""
