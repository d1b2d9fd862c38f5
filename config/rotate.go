package config

// rotateExample is what a rotate policy looks like on the command line.
const rotateExample = `{"mode":"handoff","maxTurns":40}`

// ApplyRotateJSON lays the JSON object js over base and validates the result:
// only the fields js names change, so `{"maxTurns":40}` keeps base's mode and
// contextPercent. Unknown fields are an error that names them and lists the
// allowed ones; so is anything but an object. On error it returns base
// unchanged and every problem at once.
func ApplyRotateJSON(base Rotate, js string) (Rotate, error) {
	r := base
	if err := applyJSON("rotate", rotateExample, js, &r, func() []problem { return r.problems("") }); err != nil {
		return base, err
	}
	return r, nil
}
