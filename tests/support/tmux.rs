//! The real `dsh-refs` binary in a tmux pane: start it, type at it, read the screen. The one
//! tmux driver of the end-to-end tests (`tests/e2e/`).
//!
//! A pane either runs the program alone (the tmux session ends with it: [`Tmux::start`]) or in a
//! shell that stays open afterwards, so what the program printed on exit stays readable
//! ([`Tmux::start_in_shell`], whose screen joins wrapped lines).

use std::process::Command;
use std::time::{Duration, Instant};

pub struct Tmux {
    session: String,
    /// Read the screen with wrapped lines joined (`capture-pane -J`).
    joined: bool,
}

impl Tmux {
    /// Starts `command` (a shell command line) in a detached tmux session of the given size.
    pub fn start(name: &str, command: &str, width: u16, height: u16) -> Tmux {
        let session = format!("dshrefs-{name}-{}", std::process::id());
        let status = Command::new("tmux")
            .args(["new-session", "-d", "-s", &session])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .arg(command)
            .status()
            .expect("tmux must be installed (CI installs it in .ci/run)");
        assert!(status.success(), "tmux new-session failed");
        Tmux {
            session,
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

    /// Sends tmux key names (`Enter`, `Tab`, `C-c`).
    pub fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux")
            .args(["send-keys", "-t", &self.session])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Types literal text.
    pub fn type_text(&self, text: &str) {
        let status = Command::new("tmux")
            .args(["send-keys", "-t", &self.session, "-l", text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-t", &self.session, "-p"])
            .args(self.joined.then_some("-J"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Whether the pane's program still runs (the tmux session ends with it).
    pub fn alive(&self) -> bool {
        Command::new("tmux")
            .args(["has-session", "-t", &self.session])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success()
    }

    /// Ctrl-C twice (an idle, empty composer), then waits for the program to end.
    pub fn quit(&self) {
        self.keys(&["C-c"]);
        std::thread::sleep(Duration::from_millis(100));
        self.keys(&["C-c"]);
        let start = Instant::now();
        while self.alive() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "dsh-refs did not quit; screen:\n{}",
                self.screen()
            );
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
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.session])
            .status();
    }
}
