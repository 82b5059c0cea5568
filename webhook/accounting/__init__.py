"""The accelerator model: what a pod gets, in every form, from every vendor. Pure, no I/O."""
