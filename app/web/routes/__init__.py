"""Routes: thin. Each validates ids, asks the engine or a view model, and renders or serialises."""
