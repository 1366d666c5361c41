"""Studies beyond Table II, each on the sweep's trials: the OOD splits (:mod:`.ood`), the
learning curve of experience acquisition (:mod:`.learning`), robots sharing the fleet store
(:mod:`.fleet`) and scenes drawn from the catalogue (:mod:`.procedural`)."""
