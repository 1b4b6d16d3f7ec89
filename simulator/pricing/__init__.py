"""The pricing engines at batch 1: analytic (roofline per event) and simpy (contending resources), and their accounting."""
