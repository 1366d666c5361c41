"""Studies beyond Table II, each on the sweep's trials: the OOD splits (:mod:`.ood`), the
learning curve of experience acquisition (:mod:`.learning`), robots sharing the fleet store
(:mod:`.fleet`), scenes drawn from the catalogue (:mod:`.procedural`) and retrieval judged by
what the retrieved strategy does at catalogue breadth (:mod:`.retrieval_breadth`)."""
