"""The models: export names, validation reports, and DA3 and NVDS (model, checkpoint, export, runtime)."""
