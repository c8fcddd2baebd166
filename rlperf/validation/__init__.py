"""The one check of the composed config before anything runs (:func:`rlperf.validation.
validate.validate_config`): above the leaves it asks (envs, models, resources, algos),
below the job wrapper and the stages that run it."""
