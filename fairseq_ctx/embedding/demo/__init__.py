"""The generated multilingual demo corpus of topic-labelled documents."""
