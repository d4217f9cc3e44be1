//! The standard terminal bundle: composer, `@` popup, transcript, and the app loop.
