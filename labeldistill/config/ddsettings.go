package config

// ddsettings.go: the settings method dd would ignore if given: a run refuses them (the
// command for flags, variables and config files, a sweep for its cells' keys), so that no
// setting is recorded with a run that did not use it.

// DDIgnored returns the first setting given for method dd (given says which json keys
// were set) that it ignores, and why (a clause to follow the setting's name), or "" when
// none is: dd has no online model, labels, ridge head or resets (docs/ALGORITHM.md §12),
// and its own models train with the learnt step sizes on N/dd_steps images per step, so
// the recipe's batch and rate are only the baselines' (inner_batch is their batch unless
// eval_batch is given). cfg is resolved (its baselines decide the recipe's settings).
func DDIgnored(cfg Config, given func(key string) bool) (key, why string) {
	if cfg.Method != MethodDD {
		return "", ""
	}
	for _, k := range []string{"inner_lr", "model_lr", "model_betas", "model_eps", "label_lr", "label_betas", "label_eps",
		"ridge_lambda", "ridge_pseudo_step", "scale_lr", "scale_init", "reset_window", "reset_mean_of_last"} {
		if given(k) {
			return k, "does not apply to method dd: it has no online model, labels, ridge head or resets (it learns images and step sizes; docs/ALGORITHM.md §12)"
		}
	}
	none := len(cfg.Baselines) == 0
	for _, s := range []struct {
		key, when string
		unused    bool
	}{
		{"eval_lr", "without baselines (--baselines none)", none},
		{"eval_batch", "without baselines (--baselines none)", none},
		{"inner_batch", "without baselines (--baselines none)", none},
		{"inner_batch", "beside --eval-batch, the baselines' batch", given("eval_batch")},
	} {
		if s.unused && given(s.key) {
			return s.key, "does not apply to method dd " + s.when + ": its models train with the learnt step sizes on N/dd_steps images per step, and only the baselines take a batch and a learning rate"
		}
	}
	return "", ""
}
