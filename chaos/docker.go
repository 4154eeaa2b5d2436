package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Compose drives one docker-compose project: the mesh under test. Every
// fault is a docker command on one of its containers.
type Compose struct {
	// Project names the compose project (docker-compose -p).
	Project string
	// Dir holds docker-compose.yml and .env.
	Dir string
	// Env is added to the environment of every command (ports, subnet).
	Env []string
	// Services is how many services the project has (Up counts them).
	Services int
}

// Networks of docker-compose.yml: the nodes' and the database's.
const (
	MeshNetwork     = "robonet"
	DatabaseNetwork = "pgnet"
)

// run runs a command in c.Dir and returns its trimmed standard output; the
// error quotes standard error.
func (c *Compose) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), c.Env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

func (c *Compose) compose(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, "docker-compose", append([]string{"-p", c.Project}, args...)...)
}

func (c *Compose) docker(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, "docker", args...)
}

// Up starts the project's containers and counts its services.
func (c *Compose) Up(ctx context.Context) error {
	services, err := c.compose(ctx, "config", "--services")
	if err != nil {
		return err
	}
	c.Services = len(strings.Fields(services))
	_, err = c.compose(ctx, "up", "-d")
	return err
}

// Down removes the project's containers, network and volumes; it uses its
// own context, so that it runs even when the run's was cancelled.
func (c *Compose) Down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := c.compose(ctx, "down", "-v", "--remove-orphans", "-t", "5")
	return err
}

// Logs returns the last lines each container logged.
func (c *Compose) Logs(ctx context.Context, tail int) string {
	out, err := c.compose(ctx, "logs", "--no-color", "--tail", fmt.Sprint(tail))
	if err != nil {
		return err.Error()
	}
	return out
}

// LogsBetween returns what service's container logged from since to
// until (across its restarts), with timestamps.
func (c *Compose) LogsBetween(ctx context.Context, service string, since, until time.Time) (string, error) {
	id, err := c.Container(ctx, service)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "docker", "logs", "--timestamps",
		"--since", since.UTC().Format(time.RFC3339Nano), "--until", until.UTC().Format(time.RFC3339Nano), id)
	out, err := cmd.CombinedOutput() // a node logs to stderr
	if err != nil {
		return "", fmt.Errorf("docker logs %s: %w: %s", service, err, out)
	}
	return string(out), nil
}

// Container returns the id of service's container.
func (c *Compose) Container(ctx context.Context, service string) (string, error) {
	id, err := c.compose(ctx, "ps", "-q", service)
	if err == nil && id == "" {
		err = fmt.Errorf("no container for service %s in project %s", service, c.Project)
	}
	return id, err
}

// Healthy reports whether every container of the project is running and
// healthy; want is how many there must be.
func (c *Compose) Healthy(ctx context.Context, want int) (bool, error) {
	ids, err := c.compose(ctx, "ps", "-q")
	if err != nil {
		return false, err
	}
	fields := strings.Fields(ids)
	if len(fields) != want {
		return false, nil
	}
	out, err := c.docker(ctx, append([]string{"inspect", "-f", "{{.State.Health.Status}}"}, fields...)...)
	if err != nil {
		return false, err
	}
	for _, s := range strings.Fields(out) {
		if s != "healthy" {
			return false, nil
		}
	}
	return true, nil
}

// Network returns the Docker name of the project's network that
// docker-compose.yml calls name.
func (c *Compose) Network(ctx context.Context, name string) (string, error) {
	out, err := c.docker(ctx, "network", "ls", "--filter", "label=com.docker.compose.project="+c.Project,
		"--filter", "label=com.docker.compose.network="+name, "--format", "{{.Name}}")
	if err != nil {
		return "", err
	}
	names := strings.Fields(out)
	if len(names) != 1 {
		return "", fmt.Errorf("project %s has %d networks named %s (%s), want one", c.Project, len(names), name, out)
	}
	return names[0], nil
}

// on runs docker VERB on service's container.
func (c *Compose) on(ctx context.Context, service string, verb ...string) error {
	id, err := c.Container(ctx, service)
	if err != nil {
		return err
	}
	_, err = c.docker(ctx, append(verb, id)...)
	return err
}

// Kill sends SIGKILL to service's container.
func (c *Compose) Kill(ctx context.Context, service string) error {
	return c.on(ctx, service, "kill", "-s", "KILL")
}

// Start starts service's (stopped) container again.
func (c *Compose) Start(ctx context.Context, service string) error {
	return c.on(ctx, service, "start")
}

// Restart stops service's container (SIGTERM, SIGKILL after 2 s) and
// starts it.
func (c *Compose) Restart(ctx context.Context, service string) error {
	return c.on(ctx, service, "restart", "-t", "2")
}

// Pause freezes every process of service's container.
func (c *Compose) Pause(ctx context.Context, service string) error {
	return c.on(ctx, service, "pause")
}

// Unpause thaws service's container.
func (c *Compose) Unpause(ctx context.Context, service string) error {
	return c.on(ctx, service, "unpause")
}

// WipeData deletes the data directory of a (stopped) database
// container's volume, as a lost disk would: a throwaway container of the
// same image, with the same volumes, removes it.
func (c *Compose) WipeData(ctx context.Context, service string) error {
	id, err := c.Container(ctx, service)
	if err != nil {
		return err
	}
	image, err := c.docker(ctx, "inspect", "-f", "{{.Config.Image}}", id)
	if err != nil {
		return err
	}
	_, err = c.docker(ctx, "run", "--rm", "--volumes-from", id, "--entrypoint", "/bin/sh", image, "-c", "rm -rf /var/lib/postgresql/data")
	return err
}

// SignalWALSenders sends signal (STOP, CONT) to the WAL sender processes
// of a database container's Postgres (the image has a shell, no pkill): the
// processes whose title starts "postgres: walsender" — not this shell,
// whose command line holds the word too.
func (c *Compose) SignalWALSenders(ctx context.Context, service, signal string) error {
	id, err := c.Container(ctx, service)
	if err != nil {
		return err
	}
	out, err := c.docker(ctx, "exec", id, "/bin/sh", "-c", `n=0
for p in /proc/[0-9]*; do
	case "$(cat "$p/cmdline" 2>/dev/null)" in
	"postgres: walsender"*) kill -`+signal+` "${p#/proc/}" && n=$((n + 1)) ;;
	esac
done
echo $n`)
	if err == nil && strings.TrimSpace(out) == "0" {
		err = fmt.Errorf("%s has no WAL sender to signal", service)
	}
	return err
}

// Disconnect cuts service's container off the project's network that
// docker-compose.yml calls network, and returns the address it had there,
// for Connect.
func (c *Compose) Disconnect(ctx context.Context, service, network string) (ip string, err error) {
	id, err := c.Container(ctx, service)
	if err != nil {
		return "", err
	}
	network, err = c.Network(ctx, network)
	if err != nil {
		return "", err
	}
	ip, err = c.docker(ctx, "inspect", "-f", `{{(index .NetworkSettings.Networks "`+network+`").IPAddress}}`, id)
	if err != nil {
		return "", err
	}
	_, err = c.docker(ctx, "network", "disconnect", network, id)
	return ip, err
}

// Connect puts service's container back on the project's network that
// docker-compose.yml calls network, at ip and under its service name.
func (c *Compose) Connect(ctx context.Context, service, network, ip string) error {
	id, err := c.Container(ctx, service)
	if err != nil {
		return err
	}
	network, err = c.Network(ctx, network)
	if err != nil {
		return err
	}
	args := []string{"network", "connect", "--alias", service}
	if ip != "" {
		args = append(args, "--ip", ip)
	}
	_, err = c.docker(ctx, append(args, network, id)...)
	return err
}
