// Package toolworker builds a worker process: the tools you pass, served
// on toolwire's JetStream fabric with its timeouts, heartbeats, result
// fencing and graceful shutdown. A custom worker binary is a main that
// defines its tools with package tool and calls Main:
//
//	func main() {
//		hello, err := tool.New("hello", func(ctx context.Context, in struct{ Name string `json:"name"` }) (string, error) {
//			return "hello " + in.Name, nil
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//		toolworker.Main(hello)
//	}
//
// Main reads flags and TOOLWIRE_* environment variables (--nats-url,
// --nats-creds, --pools, --concurrency, --grace, ...), stops on SIGTERM or
// SIGINT (finishing in-flight calls within --grace, handing the rest back),
// and exits 0 after a clean stop, 1 on a runtime error and 2 on bad flags.
//
// # Credentials
//
// A worker connects as the worker role (bus.RoleWorker): --nats-creds
// takes a NATS .creds file, an nkey seed file or one "user:password" line.
// Without it, on a loopback --nats-url, the worker uses the worker
// credentials a dispatcher with --nats-listen made under its data
// directory (--data, default ./data: <data>/credentials/worker.nk) if they
// exist. It dials with the role's inbox prefix and attaches to the
// installation's streams as they are (bus.Options.Bind): it creates only
// what is missing and never rewrites the limits a dispatcher set.
package toolworker
