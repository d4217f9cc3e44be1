//! The real `dsh-refs` binary in a tmux pane: start it, type at it, read the screen. The one
//! tmux driver of the end-to-end tests (`tests/e2e/`).
//!
//! A pane either runs the program alone (the tmux session ends with it: [`Tmux::start`]) or in a
//! shell that stays open afterwards, so what the program printed on exit stays readable
//! ([`Tmux::start_in_shell`], whose screen joins wrapped lines).
//!
//! Every pane has a tmux server of its own (`-L <socket>`, no config file), torn down with it.
//! Tests run in parallel: on one shared server, a test whose session was the last one could
//! stop the server just as another test's `new-session` connected to it ("server exited
//! unexpectedly"), and a user's own tmux configuration would change what the tests see.

use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux {
    /// The session's name, which is also its server's socket name.
    session: String,
    /// The server's socket file, removed with it.
    socket_path: Option<std::path::PathBuf>,
    /// Read the screen with wrapped lines joined (`capture-pane -J`).
    joined: bool,
}

impl Tmux {
    /// Starts `command` (a shell command line) in a detached tmux session of the given size.
    pub fn start(name: &str, command: &str, width: u16, height: u16) -> Tmux {
        let session = format!("dshrefs-{name}-{}", std::process::id());
        let status = tmux_on(&session)
            .args(["-f", "/dev/null", "new-session", "-d", "-s", &session])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .arg(command)
            .status()
            .expect("tmux must be installed (CI installs it in .ci/run)");
        assert!(status.success(), "tmux new-session failed");
        let socket_path = tmux_on(&session)
            .args(["display-message", "-p", "#{socket_path}"])
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .filter(|path| !path.is_empty())
            .map(std::path::PathBuf::from);
        Tmux {
            session,
            socket_path,
            joined: false,
        }
    }

    /// Runs `command` in a shell that stays open after it ends and then shows `EXITED=<status>`;
    /// the screen is read with wrapped lines joined, so a long printed line reads as one.
    pub fn start_in_shell(name: &str, command: &str, width: u16, height: u16) -> Tmux {
        let mut tmux = Tmux::start(
            name,
            &format!("{command}; echo EXITED=$?; sleep 120"),
            width,
            height,
        );
        tmux.joined = true;
        tmux
    }

    /// A tmux command on this pane's own server.
    fn tmux(&self) -> Command {
        tmux_on(&self.session)
    }

    /// Runs a tmux command on this pane's server (`display-message -p …`, `show-buffer`), and
    /// answers its stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let out = self.tmux().args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends tmux key names (`Enter`, `Tab`, `C-c`).
    pub fn keys(&self, keys: &[&str]) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", &self.session])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Types literal text.
    pub fn type_text(&self, text: &str) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", &self.session, "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Pastes `text` as a terminal paste: bracketed (`ESC[200~ … ESC[201~`) when the program
    /// asked for bracketed paste, as a terminal would.
    pub fn paste(&self, text: &str) {
        let buffer = format!("{}-paste", self.session);
        let status = self
            .tmux()
            .args(["set-buffer", "-b", &buffer, "--", text])
            .status()
            .unwrap();
        assert!(status.success());
        let status = self
            .tmux()
            .args([
                "paste-buffer",
                "-p",
                "-d",
                "-b",
                &buffer,
                "-t",
                &self.session,
            ])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub fn screen(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-t", &self.session, "-p"])
            .args(self.joined.then_some("-J"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Whether the pane's program still runs (the tmux session ends with it).
    pub fn alive(&self) -> bool {
        self.tmux()
            .args(["has-session", "-t", &self.session])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success()
    }

    /// Ctrl-C twice (an idle, empty composer), then waits for the program to end. On a loaded
    /// machine a key can reach the pane before the program reads its terminal (and be lost),
    /// so the pair is sent again every few seconds while the program lives.
    pub fn quit(&self) {
        // Not `keys`: the program may end (and its session with it) between two presses.
        let press = || {
            let _ = self
                .tmux()
                .args(["send-keys", "-t", &self.session, "C-c"])
                .stderr(std::process::Stdio::null())
                .status();
        };
        let press_twice = || {
            press();
            std::thread::sleep(Duration::from_millis(100));
            press();
        };
        press_twice();
        let start = Instant::now();
        let mut pressed = Instant::now();
        while self.alive() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "dsh-refs did not quit; screen:\n{}",
                self.screen()
            );
            if pressed.elapsed() > Duration::from_secs(4) {
                press_twice();
                pressed = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Ctrl-C twice (an idle, empty composer) in a pane of [`Tmux::start_in_shell`]; waits for
    /// the shell to show the exit status, which must be 0, and returns the screen.
    ///
    /// A Ctrl-C that lands while the session still finishes work of its own (the turn's last
    /// log writes) cancels that work instead of arming the quit, as a person's would; so the
    /// pair is pressed again, a few times at most, until the program has ended.
    pub fn quit_to_shell(&self) -> String {
        for _ in 0..5 {
            self.keys(&["C-c"]);
            std::thread::sleep(Duration::from_millis(150));
            self.keys(&["C-c"]);
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(4) {
                let screen = self.screen();
                if screen.contains("EXITED=") {
                    assert!(screen.contains("EXITED=0"), "a clean exit: {screen}");
                    return screen;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        panic!("the TUI did not exit; screen:\n{}", self.screen());
    }

    /// Polls the screen until `pred` holds; panics with the screen after 30 s.
    pub fn wait_for_screen(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if pred(&screen) {
                return screen;
            }
            if start.elapsed() > Duration::from_secs(30) {
                panic!("timed out waiting for {what}; screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self
            .tmux()
            .arg("kill-server")
            .stderr(std::process::Stdio::null())
            .status();
        if let Some(path) = &self.socket_path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A tmux command on the server whose socket is named `socket`.
fn tmux_on(socket: &str) -> Command {
    let mut command = Command::new("tmux");
    command.args(["-L", socket]);
    command
}
