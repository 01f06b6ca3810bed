package dispatchd

import (
	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/signing"
)

// signingSetup returns the dispatcher's signing key (RunConfig.SigningKey;
// else, with the embedded server, bus.DispatcherKeyFile, made when missing;
// else a new one per process) and what it trusts worker
// announcements to enrol: RunConfig.WorkerKeys and, with the embedded
// server, the local worker key under bus.SigningDir.
func signingSetup(rc RunConfig) (*signing.Key, *signing.Trust, error) {
	var key *signing.Key
	var err error
	switch {
	case rc.SigningKey != "":
		key, err = signing.LoadKey(rc.SigningKey)
	case rc.NATSURL == "":
		key, err = signing.KeyFile(bus.DispatcherKeyFile(rc.DataDir))
	default:
		// An external cluster's dispatcher may have no writable data
		// directory (a pod): a key of its own per process, enrolled at
		// start.
		key, err = signing.NewKey()
	}
	if err != nil {
		return nil, nil, err
	}
	var dirs []string
	if rc.WorkerKeys != "" {
		dirs = append(dirs, rc.WorkerKeys)
	}
	if rc.NATSURL == "" {
		dirs = append(dirs, bus.SigningDir(rc.DataDir))
	}
	trust, err := signing.NewTrust(dirs...)
	if err != nil {
		return nil, nil, err
	}
	return key, trust, nil
}
