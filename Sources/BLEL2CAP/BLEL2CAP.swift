// BLEL2CAP: see ARCHITECTURE.md for this layer's role.
